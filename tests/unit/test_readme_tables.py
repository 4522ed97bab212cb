"""The documentation renders and holds together: no table broken by a blank line (GitHub would end
it there), and every link between the README, docs/ and CONTRIBUTING.md reaches a file and heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import ROOT

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of ``path`` (code blocks skipped)."""
    found, fence = set(), False
    for line in path.read_text().splitlines():
        fence = fence != line.startswith("```")
        heading = re.match(r"^#{1,6} (.*)$", line)
        if heading and not fence:
            found.add(re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_table_is_broken_by_a_blank_line(path):
    lines = path.read_text().splitlines()
    broken = [number + 1 for number in range(1, len(lines) - 1)
              if not lines[number].strip() and lines[number - 1].startswith("|") and lines[number + 1].startswith("|")]
    assert broken == [], f"{path.name} lines {broken}: a blank line splits a table"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_its_file_and_heading(path):
    dead = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists() or anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            dead.append(target)
    assert dead == []


def test_the_readme_is_a_short_entry_with_the_two_commands_first():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[2] == "```sh" and lines[3].endswith("vgate serve") and lines[4].endswith(".venv/bin/pytest")
    assert len(lines) < 120
