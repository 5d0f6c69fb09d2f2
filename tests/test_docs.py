"""docs/safety.md is the README's Safety section and exit codes, word for word (one text)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_safety() -> str:
    """The README from '## Safety' up to (not including) '## The digest'."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Safety\n")
    end = text.index("## The digest\n")
    return text[start:end].rstrip() + "\n"


def test_docs_safety_is_the_readme_section() -> None:
    docs = (ROOT / "docs" / "safety.md").read_text(encoding="utf-8")
    body = docs.split("\n", 2)[2] if docs.startswith("<!--") else docs
    assert body == readme_safety(), "regenerate docs/safety.md from the README (see its first line)"


def test_the_readme_commands_section_names_every_command() -> None:
    import re

    from statemigrate.cli import main

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Commands\n") : text.index("## Schema upgrades in place\n")]
    missing = [n for n in main.commands if not re.search(rf"`statemigrate {n}\b", section)]
    assert not missing, f"README's Commands section lacks {missing}"
