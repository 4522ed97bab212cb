"""The documentation renders and holds together: no table broken by a blank line (GitHub would end
it there), and every link between the README, docs/ and CONTRIBUTING.md reaches a file and heading."""

from __future__ import annotations

import json
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


# A path in backquotes that starts with a folder of the repository (``webhook/core/kinds.py``,
# ``tests/unit/core/test_kinds.py``), or a module of the package named from its layer (``core/kinds``).
REPOSITORY_PATH = re.compile(r"`((?:webhook|tests|bench|e2e|charts|deploy|policies|docs|\.ci|\.regal)/[^`\s]*)`")
PACKAGE_PATH = re.compile(r"`((?:core|server|offline|policy|audit|cluster|files|reports)/[a-z_/]+(?:\.py)?)`")


GENERATED = (".ci/artifacts/",)  # written by the test run itself (the report's screenshot): cited, never committed


def cited_paths(text: str) -> list[str]:
    """Every repository file or folder a document cites that does not exist (placeholders skipped)."""
    missing = []
    for match in REPOSITORY_PATH.finditer(text):
        path = match[1].split("::")[0].rstrip(".,:;)")
        if not any(mark in path for mark in "<*{$") and not path.startswith(GENERATED) and not (ROOT / path).exists():
            missing.append(match[1])
    for match in PACKAGE_PATH.finditer(text):
        module = ROOT / "webhook" / match[1].rstrip("/")
        if not (module.exists() or module.with_name(module.name + ".py").exists()):
            missing.append(match[1])
    return missing


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_and_module_exists(path):
    assert cited_paths(path.read_text()) == []


def test_the_cited_path_check_sees_a_missing_file():
    assert cited_paths("see `webhook/server/app.py` and `server/app`, not `webhook/core/kinds.py`") == [
        "webhook/server/app.py", "server/app"]
    assert cited_paths("`.ci/artifacts/report.png`, `.ci/runs`") == [".ci/runs"]  # an artifact of the run alone


def test_every_go_version_stated_is_the_one_the_modules_need():
    """README, .ci/run and e2e/build.py name the Go the tests' modules need (their highest `go` line):
    three versions were stated before, none of them this one."""
    modules = [ROOT / "e2e" / "build" / "go.mod", *(ROOT / "e2e" / "build" / name / "go.mod"
                                                     for name in ("kwok", "opa", "regal"))]
    needed = max(tuple(int(part) for part in re.search(r"^go (\d+)\.(\d+)", module.read_text(), re.M).groups())
                 for module in modules)
    stated = {(str(file.relative_to(ROOT)), version)
              for file in (ROOT / "README.md", ROOT / ".ci" / "run", ROOT / "e2e" / "build.py")
              for version in re.findall(r"(1\.\d+) or later", file.read_text())}
    assert {file for file, _ in stated} == {"README.md", ".ci/run", "e2e/build.py"}
    assert {version for _, version in stated} == {"%d.%d" % needed}, stated


LOAD_RESULTS = ROOT / "bench" / "results" / "load.json"
QUOTED = {"/healthz": "granian  floor GET /healthz", "/mutate": "granian  POST /mutate   sensitive",
          "/validate": "granian  POST /validate sensitive"}


def quoted_cpu(text: str) -> dict[str, int]:
    """The first CPU figure per endpoint in each paragraph that cites bench/results/load.json."""
    found: dict[str, int] = {}
    for paragraph in text.split("\n\n"):
        if "`bench/results/load.json`" in paragraph:
            for endpoint, figure in re.findall(r"`(/healthz|/mutate|/validate)` ([\d,]+) µs", paragraph):
                found.setdefault(endpoint, int(figure.replace(",", "")))
    return found


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "docs" / "operators.md"], ids=lambda p: p.name)
def test_the_request_paths_figures_are_the_benchs_own(path):
    """README and operators.md quote the server's CPU per request from the file bench/load.py wrote
    (--results): they once gave two figures for one run and credited one to two event loops."""
    medians = json.loads(LOAD_RESULTS.read_text())["medians"]
    quoted = quoted_cpu(path.read_text())
    assert set(quoted) == set(QUOTED), quoted
    assert quoted == {endpoint: round(medians[name]["cpu_us"]) for endpoint, name in QUOTED.items()}
