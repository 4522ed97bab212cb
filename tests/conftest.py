"""Fixtures shared by every test: the shipped config and engine, real servers over HTTPS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from webhook.core.config import load_config
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
