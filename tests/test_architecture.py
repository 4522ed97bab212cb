"""The layers of README "Architecture", enforced: imports point inward, the core stays pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import ROOT

PACKAGE = ROOT / "webhook"
# Each layer and the layers it may import (besides itself); the CLI and the package root may import all.
MAY_IMPORT = {
    "core": set(),
    "policy": {"core"},
    "audit": {"core"},
    "reports": {"core", "policy", "audit"},
    "server": {"core", "policy", "audit", "reports"},
    "offline": {"core", "policy"},
}
# What would make the core do I/O, keep state or read the clock.
IMPURE = {"os", "socket", "threading", "time", "subprocess", "logging", "requests", "flask", "gunicorn",
          "prometheus_client", "regorus", "opa_client"}
CLOCK_READS = {"now", "utcnow", "today", "time", "perf_counter", "monotonic"}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, relative ones resolved."""
    package = ["webhook", *path.relative_to(PACKAGE).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [module] if node.module else [f"{module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in names]
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_inward(path: Path):
    layer = layer_of(path)
    if layer is None:
        return  # the CLI and the package root sit on top of everything
    allowed = MAY_IMPORT[layer] | {layer}
    for line, module in imported(path):
        parts = module.split(".")
        if parts[0] == "webhook" and len(parts) > 1:
            assert parts[1] in allowed, f"{path.relative_to(ROOT)}:{line}: {layer} imports {module}"


def test_every_package_is_a_known_layer():
    assert {layer_of(p) for p in modules()} - {None} == set(MAY_IMPORT)


@pytest.mark.parametrize("path", [p for p in modules() if layer_of(p) == "core"], ids=lambda p: p.name)
def test_the_core_does_no_io_and_reads_no_clock(path: Path):
    for line, module in imported(path):
        assert module.split(".")[0] not in IMPURE, f"{path.name}:{line} imports {module}"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in CLOCK_READS, f"{path.name}:{node.lineno} reads the clock"


def test_the_check_sees_a_wrong_way_import(tmp_path):
    """The checker itself: a core module importing the server is caught."""
    bad = PACKAGE / "core" / "_bad_import_probe.py"
    bad.write_text("from ..server.gateway import Gateway\n")
    try:
        with pytest.raises(AssertionError, match="core imports webhook.server.gateway"):
            test_imports_point_inward(bad)
    finally:
        bad.unlink()
