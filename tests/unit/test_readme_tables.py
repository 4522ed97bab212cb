"""The README's tables render as tables: no blank line inside one (GitHub would end it there)."""

from __future__ import annotations

from helpers import ROOT


def test_no_table_is_broken_by_a_blank_line():
    lines = (ROOT / "README.md").read_text().splitlines()
    broken = [number + 1 for number in range(1, len(lines) - 1)
              if not lines[number].strip() and lines[number - 1].startswith("|") and lines[number + 1].startswith("|")]
    assert broken == [], f"README.md lines {broken}: a blank line splits a table"
