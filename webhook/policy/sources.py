"""The one reader of Rego sources: the files of a policy directory, their packages, the decision
rules each rule package defines, and each rule's ``# METADATA`` block.

The revision every decision records is the sha256 of the files' paths and texts. Packages and
rule heads are read with two anchored patterns (rule heads must be written ``deny contains ...``
at the start of a line, as ``opa fmt`` writes them); METADATA is the YAML of a file's leading
comment block, as OPA's annotations are.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import PolicyError

PACKAGE_LINE = re.compile(r"^package\s+([\w.]+)", re.MULTILINE)
_DECISION_HEAD = re.compile(r"^(deny|warn)\s+contains\b", re.MULTILINE)
_RULE_PACKAGE = re.compile(r"^vgate\.rules\.\w+$")
_TEST_RULE = re.compile(r"^(test_\w+)\b", re.MULTILINE)


@dataclass(frozen=True)
class PolicySet:
    """The Rego sources of a policy directory and their sha256 revision."""

    root: Path
    files: tuple[tuple[str, str], ...]  # (path, text), sorted by path
    revision: str


@dataclass
class RuleInfo:
    """What a rule's METADATA says of it, for reports."""

    id: str
    title: str = ""
    severity: str = "medium"
    category: str = ""
    control: str = ""


def load_policy_set(root: str | Path, *, include_tests: bool = False) -> PolicySet:
    """Read every ``.rego`` file under ``root``; unit tests (``*_test.rego``) only when asked.

    A ConfigMap volume (``root/..data`` -> ``..<timestamp>/``) is read through ``..data``: while the
    kubelet swaps it, the old and the new ``..<timestamp>`` directories are both there for a moment,
    and reading both would serve the old and the new policies together until the next reload."""
    root = Path(root)
    if (root / "..data").is_dir():
        root = root / "..data"
    if not root.is_dir():
        raise PolicyError(str(root.absolute()), None, "policy directory does not exist: give it with --policies DIR "
                          "(vgate test DIR), or run vgate from the directory that holds policies/")
    paths = sorted(p for p in root.rglob("*.rego") if include_tests or not p.name.endswith("_test.rego"))
    if not paths:
        raise PolicyError(str(root), None, "no .rego files found")
    files = tuple((str(p), p.read_text(encoding="utf-8")) for p in paths)
    digest = hashlib.sha256()
    for path, text in files:
        digest.update(str(Path(path).relative_to(root)).encode() + b"\0" + text.encode() + b"\0")
    return PolicySet(root, files, digest.hexdigest())


def package_of(text: str) -> str | None:
    """The package a Rego file declares."""
    match = PACKAGE_LINE.search(text)
    return match.group(1) if match else None


def decision_rules(policy_set: PolicySet) -> dict[str, set[str]]:
    """Which of ``deny``/``warn`` each rule package (``vgate.rules.<name>``) defines."""
    found: dict[str, set[str]] = {}
    for _, text in policy_set.files:
        package = package_of(text)
        if package and _RULE_PACKAGE.match(package) and not package.endswith("_test"):
            found.setdefault(package, set()).update(_DECISION_HEAD.findall(text))
    return found


def test_rules(text: str) -> list[tuple[str, int]]:
    """The unit tests (``test_*`` rules) of a ``*_test.rego`` file, with their lines, as `opa test` finds them."""
    return [(match.group(1), text.count("\n", 0, match.start()) + 1) for match in _TEST_RULE.finditer(text)]


def policy_metadata(path: str | Path) -> dict[str, Any]:
    """The YAML of a policy file's leading ``# METADATA`` comment block ({} if it has none)."""
    lines = Path(path).read_text().splitlines()
    if not lines or lines[0] != "# METADATA":
        return {}
    block = []
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        block.append(line[2:] if line.startswith("# ") else line[1:])
    return yaml.safe_load("\n".join(block)) or {}


def rule_catalogue(policy_dir: str | Path) -> dict[str, RuleInfo]:
    """Each rule's METADATA (id, title, severity, category, MLPS control), by rule id."""
    catalogue = {}
    for path in sorted(Path(policy_dir).glob("*/policy.rego")):
        metadata = policy_metadata(path)
        custom = metadata.get("custom") or {}
        info = RuleInfo(path.parent.name, metadata.get("title", ""), custom.get("severity", "medium"),
                        custom.get("category", ""), custom.get("control", ""))
        catalogue[info.id] = info
    return catalogue
