"""The chart's objects as a real API server takes them: every built-in object of each value set the
chart tests render is created with a server-side dry run, as a release of its own beside the e2e
cluster's vgate (names never collide), so the API server's own validation and admission (vgate's
webhooks included) judge each one. As a second release does, these set priorityClasses.create: false:
the cluster's own vgate created the PriorityClasses from the same chart (e2e/cluster.py)."""

from __future__ import annotations

import sys

import pytest
import yaml

from e2e import charts
from e2e.kube import Kube

from helpers import ROOT

sys.path.insert(0, str(ROOT / "deploy"))
from render import render

sys.path.insert(0, str(ROOT / "tests" / "server"))
from test_chart import CUSTOM_GROUPS, VALUE_SETS


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_the_api_server_takes_every_rendered_object(kube: Kube, name: str) -> None:
    values = {**VALUE_SETS[name], "priorityClasses": {"create": False}}
    objects = [o for o in render(values, namespace=charts.VGATE_NAMESPACE, release=f"chart-{name}")
               if not o["apiVersion"].startswith(CUSTOM_GROUPS)]
    assert objects and not [o for o in objects if o["kind"] == "PriorityClass"]
    created = kube.run("create", "--dry-run=server", "-f", "-", input_text=yaml.safe_dump_all(objects))
    assert created.ok, f"{name}: {created.stderr}"
    assert created.stdout.count("(server dry run)") == len(objects), created.stdout
