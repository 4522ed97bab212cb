"""Fixtures shared by every test: the shipped config and engine, real servers over HTTPS.

Tests are placed by what they start: tests/unit start nothing (in process, or the `vgate` CLI),
tests/server start `vgate serve` over HTTPS, tests/e2e a control plane. Collection refuses a test
that starts a server outside tests/server and tests/e2e, and the session fails if any test leaves
a file in the source tree.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.files.config_file import load_config
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, Server

SERVER_FIXTURES = {"server", "start_server"}
STARTS_SERVERS = ("tests/server/", "tests/e2e/")
SOURCE_TREE = ["webhook", "policies", "charts", "deploy", "tests", "e2e", "bench", "docs", "README.md"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    misplaced = [item.nodeid for item in items if SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
                 and not item.nodeid.startswith(STARTS_SERVERS)]
    if misplaced:
        raise pytest.UsageError("tests that start vgate serve belong in tests/server: " + ", ".join(misplaced))


def source_tree_state() -> dict[str, float]:
    """Each changed or untracked file of the source tree (git's view) and its modification time."""
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", *SOURCE_TREE],
                            cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()
    paths = [root / line[3:].split(" -> ")[-1] for line in listed]
    return {str(path): path.stat().st_mtime if path.exists() else -1.0 for path in paths}


@pytest.fixture(scope="session", autouse=True)
def source_tree_untouched() -> Iterator[None]:
    """No test writes into the source tree: everything goes under tmp_path."""
    before = source_tree_state()
    yield
    assert source_tree_state() == before, "a test wrote into the source tree"


@pytest.fixture(scope="session")
def config():
    return load_config()


@pytest.fixture(scope="session")
def engine(config):
    return RegorusEngine(load_policy_set(POLICIES), config.document)


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("server"))
    yield running
    running.stop()


@pytest.fixture
def start_server(tmp_path) -> Iterator[Any]:
    """Start extra servers with their own config or policies; stopped after the test."""
    started: list[Server] = []

    def start(**kwargs: Any) -> Server:
        started.append(Server(tmp_path / f"s{len(started)}", **kwargs))
        return started[-1]

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (the tests run as root, as CI does), for a disk that fills."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    assert done.returncode == 0, f"a tmpfs is needed (run as root, as CI does): {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)  # a log may still hold its segment


@pytest.fixture(scope="session")
def opa_binary() -> Path:
    """Real OPA, built (and cached) alone from its Go module (e2e/build/opa)."""
    from e2e import build

    return build.build_tool("opa")
