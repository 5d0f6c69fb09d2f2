"""A mkdocs hook: the command reference page, written from click at build time.

The page is each command's own ``--help``, so it cannot drift from the code.
``tests/test_docs.py`` renders it too.
"""

from __future__ import annotations

from typing import Any

import click

PAGE = "reference.md"


def render() -> str:
    """Every command's ``--help``, in order, as one Markdown page.

    Returns:
        The page's Markdown text.
    """
    from statemigrate.cli import main

    lines = [
        "# Command reference",
        "",
        "Each command's `--help`, generated from the code when the site is built.",
        "The [commands page](commands.md) explains what they do together.",
        "",
    ]

    def walk(command: click.Command, ctx: click.Context, path: str) -> None:
        lines.extend([f"## `{path}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""])
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(
                        sub,
                        click.Context(sub, info_name=name, parent=ctx, max_content_width=88),
                        f"{path} {name}",
                    )

    walk(main, click.Context(main, info_name="statemigrate", max_content_width=88), "statemigrate")
    return "\n".join(lines)


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated reference page to the site (mkdocs hook)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
