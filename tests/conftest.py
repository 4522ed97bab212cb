"""Fixtures shared by every test: the shipped config and engine, real servers over HTTPS."""

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
