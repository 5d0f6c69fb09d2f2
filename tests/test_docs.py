"""The docs: one copy of each text, the command reference generated from click, every page on the site."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click
import yaml

from statemigrate.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a Markdown text (code blocks, headings and short lines left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return [
        " ".join(p.split())
        for p in text.split("\n\n")
        if len(p) > 120 and not p.lstrip().startswith("#")
    ]


def hook(name: str):
    """The mkdocs hook ``docs/hooks/NAME.py``, loaded as a module."""
    spec = importlib.util.spec_from_file_location(
        f"docs_{name}_hook", DOCS / "hooks" / f"{name}.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands_hook():
    return hook("commands")


def test_docs_safety_is_the_one_copy() -> None:
    safety = (DOCS / "safety.md").read_text(encoding="utf-8")
    for heading in (
        "## What is guaranteed",
        "## What is not guaranteed",
        "## How this is tested",
        "## Exit codes",
    ):
        assert f"\n{heading}\n" in safety, heading
    text = readme()
    section = text[text.index("## Safety\n") :]
    section = section[: section.index("\n## ", 1)]
    assert "docs/safety.md" in section, "the README's Safety summary links the page"
    flat = " ".join(text.split())
    copied = [p[:60] for p in paragraphs(safety) if p in flat]
    assert not copied, f"the README repeats docs/safety.md: {copied}"


def test_the_commands_section_names_every_command() -> None:
    text = readme()
    section = text[text.index("## Commands\n") : text.index("## Schema upgrades in place\n")]
    missing = [n for n in main.commands if not re.search(rf"`statemigrate {n}\b", section)]
    assert not missing, f"README's Commands section lacks {missing}"


def test_the_command_reference_is_every_commands_help() -> None:
    page = commands_hook().render()
    ctx = click.Context(main, info_name="statemigrate")
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        assert f"## `statemigrate {name}`\n" in page, name
        usage = f"Usage: statemigrate {name} "
        assert usage in page, usage
        first_line = (command.help or "").strip().splitlines()[0]
        assert " ".join(first_line.split()[:6]) in " ".join(page.split()), name
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                assert f"## `statemigrate {name} {sub}`\n" in page, f"{name} {sub}"


def test_every_page_is_on_the_site_and_every_readme_link_resolves() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = {next(iter(item.values())) for item in config["nav"]}
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.glob("*.md")} | {commands_hook().PAGE}
    assert pages == in_nav, (
        f"pages not in mkdocs.yml's nav, or nav entries without a page: {pages ^ in_nav}"
    )
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme()):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links {target}, which does not exist"


def test_every_layout_in_the_docs_and_in_schemas_layouts_loads() -> None:
    """The layouts the docs show and ship (``schemas/layouts/``) are ones the loader takes
    for the engine they name: the docs cannot drift from the layout files' syntax."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    from statemigrate.layout import load_layout
    from statemigrate.registry import get_engine

    text = (DOCS / "layouts.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    files = sorted((ROOT / "schemas" / "layouts").glob("*.toml"))
    assert len(blocks) >= 6 and len(files) >= 7
    tmp = ROOT / "build" / "doc-layouts"
    tmp.mkdir(parents=True, exist_ok=True)
    checked = []
    for i, block in enumerate(blocks):
        path = tmp / f"block{i}.toml"
        path.write_text(block, encoding="utf-8")
        checked.append(path)
    checked += files
    for path in checked:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        if "sql" not in raw and "sqlite" not in raw and "kv" not in raw:
            continue  # the fields every layout has, shown alone
        engine = get_engine(raw["engine"])
        layout = load_layout(path, engine.name, engine.layout_family)
        assert layout.engine == raw["engine"], path


# --- the benchmark page: data files, a table each, a chart -------------------------------


def benchmarks_hook():
    return hook("benchmarks")


def test_the_benchmark_page_shows_every_data_file_with_its_command() -> None:
    hook = benchmarks_hook()
    results = hook._results_module()
    source = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    named = hook.MARK.findall(source)
    files = sorted(p.stem for p in results.RESULTS.glob("*.json"))
    assert len(files) >= 10, files
    assert sorted(named) == files, "every data file on the page once, and nothing else"
    page = hook.render(source)
    assert "<!-- results:" not in page
    for name, table in results.read_all().items():
        assert table.name == name and table.rows, name
        assert all(len(row) == len(table.columns) for row in table.rows), name
        assert table.command.startswith("python benchmarks/"), (name, table.command)
        assert (ROOT / table.command.split()[1]).is_file(), (name, table.command)
        assert f"Measured with `{table.command}`" in page, name
        assert "\n".join(table.markdown()) in page, name


def test_the_benchmark_chart_is_drawn_from_the_data_files() -> None:
    """The committed SVG names each job and pair of the two files it is drawn from
    (``benchmarks/chart.py`` keeps text as text), and carries no date."""
    results = benchmarks_hook()._results_module()
    source = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "](img/benchmarks.svg)" in source
    svg = (DOCS / "img" / "benchmarks.svg").read_text(encoding="utf-8")
    for name in ("convert", "memory"):
        for row in results.read(name).rows:
            assert str(row[0]).replace("`", "") in svg, (name, row[0])
    assert "<dc:date>" not in svg


def test_the_benchmark_page_has_no_timestamps_hashes_or_history() -> None:
    results = ROOT / "benchmarks" / "results"
    texts = {"docs/benchmarks.md": (DOCS / "benchmarks.md").read_text(encoding="utf-8")}
    texts |= {
        f"benchmarks/results/{p.name}": p.read_text(encoding="utf-8")
        for p in results.glob("*.json")
    }
    # Words of a lab notebook: figures are what the scripts measured, not their history.
    history = re.compile(
        r"\b(earlier|previous|session|since this run|in this run|this section said"
        r"|a second run|the first run)\b",
        re.IGNORECASE,
    )
    for where, text in texts.items():
        hexword = r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"
        assert not re.search(hexword, text), (where, "a commit hash")
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\b\d\d:\d\d\b", text), (where, "a time")
        found = history.search(text)
        assert found is None, (where, found.group(0) if found else "")


def test_the_results_writer_keeps_what_it_wrote(tmp_path: Path) -> None:
    results = benchmarks_hook()._results_module()
    table = results.Table(
        "t", "a title", "python benchmarks/run.py", "one run",
        [results.Column("what", align="left"), results.Column("rate", ",.0f", " /s")],
        [["a | b", 1234.5678901], ["c", None]],
    )  # fmt: skip
    results.write(table, tmp_path)
    back = results.read("t", tmp_path)
    assert back.markdown() == [
        "| what | rate |",
        "|---|---:|",
        "| a \\| b | 1,235 /s |",
        "| c | — |",
    ]
    line = results.command_line(
        "rss.py", ["--runs", "5", "--dir", "/x", "--results=out", "--json", "j"]
    )
    assert line == "python benchmarks/rss.py --runs 5"
