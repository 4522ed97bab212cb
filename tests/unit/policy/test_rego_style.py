"""The policies pass Regal (the Rego linter) under .regal/config.yaml and are as `opa fmt` writes them.

Both binaries are built alone from their Go modules (e2e/build.py's ``build_tool``), not with the
control plane: OPA, whose formatter is the one the README asks policy authors to use, and Regal.
The deliberate exceptions are recorded once, with their reasons, in .regal/config.yaml.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from e2e import build

from helpers import POLICIES, ROOT

CONFIG = ROOT / ".regal" / "config.yaml"


@pytest.fixture(scope="module")
def binaries() -> Path:
    """The folder holding opa and regal, each built alone."""
    folders = {build.build_tool(name).parent for name in build.TOOLS}
    assert len(folders) == 1
    return folders.pop()


def regal(binaries: Path, policies: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(binaries / "regal"), "lint", "--config-file", str(CONFIG), "--format", "compact",
                           str(policies)], capture_output=True, text=True, timeout=300)


def test_the_policies_pass_regal(binaries):
    result = regal(binaries, POLICIES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_policies_are_as_opa_fmt_writes_them(binaries):
    result = subprocess.run([str(binaries / "opa"), "fmt", "--list", str(POLICIES)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_regal_and_opa_fmt_find_a_careless_rule(binaries, tmp_path):
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies, ignore=shutil.ignore_patterns("samples"))
    careless = policies / "network-no-external" / "policy.rego"
    careless.write_text(careless.read_text() + "\nunused_helper(x) := y if {\n    y := x\n}\n")
    assert regal(binaries, policies).returncode != 0  # pointless reassignment, indentation
    listed = subprocess.run([str(binaries / "opa"), "fmt", "--list", str(policies)], capture_output=True, text=True,
                            timeout=120).stdout
    assert str(careless) in listed
