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
    "files": {"core"},
    "policy": {"core"},
    "audit": {"core"},
    "cluster": {"core"},
    "reports": {"core", "policy", "audit", "cluster", "forward"},
    "forward": {"core", "audit"},
    "server": {"core", "files", "policy", "audit", "reports", "cluster", "forward"},
    "offline": {"core", "files", "policy", "cluster"},
    "background": {"core", "files", "policy", "cluster", "reports", "offline"},
}
# What would make the core do I/O, keep state or read the clock: modules, calls and attributes.
IMPURE = {"os", "socket", "threading", "time", "subprocess", "logging", "requests", "flask", "gunicorn",
          "prometheus_client", "regorus", "opa_client", "pathlib", "io", "importlib", "glob", "shutil",
          "tempfile", "urllib", "http", "fcntl", "signal", "multiprocessing", "asyncio", "sqlite3", "sys"}
CLOCK_READS = {"now", "utcnow", "today", "time", "perf_counter", "monotonic", "time_ns", "process_time"}
FILE_ACCESS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "exists", "is_file", "is_dir",
               "iterdir", "glob", "rglob", "mkdir", "unlink", "stat", "touch", "rename", "resolve"}  # not replace (str)
BUILTINS = {"open", "input", "print", "getattr", "__import__", "eval", "exec", "compile"}


def impurities(source: str) -> list[str]:
    """Every place in ``source`` that does I/O or reads the clock: an impure import; a call of open,
    print, getattr and the like (getattr could reach either by a string); any use of an attribute
    named like a clock read or a file access, called or not (``now = datetime.now`` is one, and so
    is ``D.now()`` after ``from datetime import datetime as D``)."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name.split(".")[0] in IMPURE]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in IMPURE:
            found.append(f"{node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
            found.append(f"{node.lineno}: calls {node.func.id}")
        elif isinstance(node, ast.Attribute) and node.attr in CLOCK_READS:
            found.append(f"{node.lineno}: reads the clock ({node.attr})")
        elif isinstance(node, ast.Attribute) and node.attr in FILE_ACCESS:
            found.append(f"{node.lineno}: touches files ({node.attr})")
    return found


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
    assert impurities(path.read_text()) == [], path.name


@pytest.mark.parametrize("probe,finding", [
    ("from pathlib import Path\n", "imports pathlib"),
    ("def f(p):\n    return p.read_text()\n", "touches files (read_text)"),
    ("def f(p):\n    with open(p) as h:\n        return h.read()\n", "calls open"),
    ("from datetime import datetime as D\ndef f():\n    return D.now()\n", "reads the clock (now)"),
    ("from datetime import datetime\nclock = datetime.now\n", "reads the clock (now)"),
    ("import datetime\ndef f():\n    return getattr(datetime.datetime, 'now')()\n", "calls getattr"),
    ("import os as o\n", "imports os"),
    ("from importlib import resources\n", "imports importlib"),
])
def test_the_purity_check_finds_io_and_clock_reads_however_spelled(probe: str, finding: str):
    """The checker itself, on the ways a core module could read a file or the clock."""
    assert any(found.endswith(finding) for found in impurities(probe)), impurities(probe)


def test_the_check_sees_a_wrong_way_import():
    """The checker itself: a core module importing the server is caught (on a copy, not in the tree)."""
    module = PACKAGE / "core" / "probe.py"
    package = ["webhook", *module.relative_to(PACKAGE).parent.parts]
    tree = ast.parse("from ..server.gateway import Gateway\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    resolved = ".".join([*package[: len(package) - node.level + 1], str(node.module)])
    assert resolved == "webhook.server.gateway" and resolved.split(".")[1] not in MAY_IMPORT["core"]


def exception_classes(source: str) -> list[str]:
    """Names of the classes in ``source`` that derive from an exception (by the base's name)."""
    return [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)
            and any(isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception", "Timeout", "Gone",
                                                                     "Refused", "Reportable", "Seal"))
                    for base in node.bases)]


def test_every_error_is_defined_in_the_one_hierarchy():
    errors = PACKAGE / "core" / "errors.py"
    outside = {f"{p.relative_to(ROOT)}: {name}" for p in modules() if p != errors
               for name in exception_classes(p.read_text())}
    assert outside == set()
    tree = {name for name in exception_classes(errors.read_text())}
    documented = errors.read_text().split('"""')[1]
    assert {name for name in tree if name not in documented} == set()


def test_the_error_check_sees_a_stray_exception():
    assert exception_classes("class Stray(Exception):\n    pass\n") == ["Stray"]


# The environment as an input: the runtime directory's one variable (and prometheus_client's), and
# what an operator or Kubernetes sets for a pod. Nothing else passes between processes that way.
ENVIRONMENT_READERS = {"webhook/server/runtime.py", "webhook/audit/log.py", "webhook/cluster/api.py"}


ENVIRONMENT = {"environ", "environb", "getenv", "putenv", "unsetenv"}


def reads_environment(source: str) -> bool:
    """Whether ``source`` touches the process environment: ``os.environ``, ``os.getenv`` (``os`` under any
    name) or their import by name; a WSGI request's ``environ`` is not it."""
    tree = ast.parse(source)
    os_names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names if alias.name == "os"}
    return any(isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT
               and isinstance(node.value, ast.Name) and node.value.id in os_names
               or isinstance(node, ast.ImportFrom) and node.module == "os"
               and any(alias.name in ENVIRONMENT for alias in node.names)
               for node in ast.walk(tree))


def test_processes_share_a_runtime_directory_not_environment_variables():
    readers = {str(p.relative_to(ROOT)) for p in modules() if reads_environment(p.read_text())}
    assert readers - ENVIRONMENT_READERS == set()


def test_the_environment_check_sees_a_read():
    assert reads_environment("import os\ntoken = os.getenv('VGATE_TOKEN')\n")
    assert reads_environment("import os as o\ntoken = o.environ['VGATE_TOKEN']\n")
    assert not reads_environment("def f(request):\n    return request.environ['wsgi.input']\n")
    assert reads_environment("from os import environ as e\nx = e['A']\n")


def test_the_command_line_only_parses_and_prints():
    """The verbs' modules stay small: their work lives in the layers (launch, eval_run, evidence, schedule)."""
    commands = [ROOT / "webhook" / "cli.py", ROOT / "webhook" / "cli_evidence.py"]
    assert {p.name: n for p in commands if (n := len(p.read_text().splitlines())) >= 300} == {}


def document_reads(source: str) -> list[str]:
    """Every read of a config document by key (``config.document["volcano"]``, ``document["queues"]``):
    the typed sections of core/config.py are the one place that reads it."""
    return [f"{node.lineno}: reads the config document by key" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Subscript) and (
                (isinstance(node.value, ast.Attribute) and node.value.attr == "document")
                or (isinstance(node.value, ast.Name) and node.value.id == "config_document"))]


# The loader that builds the config and the sections that read it.
OTHER_DOCUMENTS = {"core/config.py", "files/config_file.py", "files/example_config.py"}


@pytest.mark.parametrize("path", [p for p in modules() if p.relative_to(PACKAGE).parts[0] in ("core", "server",
                                                                                          "offline", "cluster")
                                  and str(p.relative_to(PACKAGE)) not in OTHER_DOCUMENTS],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_config_is_read_through_its_typed_sections(path: Path):
    assert document_reads(path.read_text()) == []


def test_the_document_check_sees_a_read():
    found = document_reads('x = config.document["volcano"]["schedulerName"]\n')
    assert found == ["1: reads the config document by key"]


def test_every_package_is_in_the_wheel():
    """pyproject.toml lists the packages the wheel (and so the image) carries: one left out imports in
    the checkout and fails in the image (webhook.forward was, for a commit)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert packages == listed, packages ^ listed
