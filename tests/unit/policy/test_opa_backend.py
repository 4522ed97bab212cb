"""The remote OPA backend (`vgate serve --opa-url`), against a real OPA and against tests/fake_opa.py.

The real one (`opa run --server` on the shipped policies, OPA built from its Go module with the
e2e control plane) judges every sample as the in-process regorus engine does, and `opa test` passes
every Rego test. The fake injects what a real OPA will not do on demand: being down, slow, answering
500, garbage or a result that breaks the decision contract.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import POLICIES, VGATE

SAMPLES = sorted(POLICIES.glob("*/samples/*.yaml"))


def test_opa_test_passes_every_rego_test_regorus_passes(opa_binary: Path) -> None:
    """The same tests, under OPA's exact arithmetic and regorus's floats: none may rely on either."""
    opa = subprocess.run([str(opa_binary), "test", str(POLICIES), "--ignore", "*.yaml"], capture_output=True,
                         text=True, timeout=300)
    ours = subprocess.run([*VGATE, "test", str(POLICIES)], capture_output=True, text=True, timeout=300)
    assert opa.returncode == 0 and ours.returncode == 0, opa.stdout + ours.stdout
    count = ours.stdout.split("tests: ")[1].split("/")[0]
    assert f"PASS: {count}/{count}" in opa.stdout, opa.stdout
