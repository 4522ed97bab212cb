"""One example config: the chart's config value and the Rego tests' config derive from it."""

from __future__ import annotations

import yaml

from webhook.files.config_file import DEFAULT_CONFIG_PATH
from webhook.files.example_config import CHART_PLACES, chart_config_block, derived_files, rego_config

from helpers import ROOT


def test_the_chart_and_the_rego_tests_hold_what_the_example_gives():
    stale = [str(path.relative_to(ROOT)) for path, text in derived_files(ROOT).items() if path.read_text() != text]
    assert stale == [], "run `python deploy/render.py`"


def test_the_chart_takes_every_setting_but_the_places_it_sets_itself():
    example = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    chart = yaml.safe_load(chart_config_block())["config"]
    for key, dropped in CHART_PLACES.items():
        if dropped is None:
            example.pop(key)
        else:
            for name in dropped:
                example[key].pop(name)
    assert chart == example


def test_a_changed_example_changes_what_derives_from_it():
    text = DEFAULT_CONFIG_PATH.read_text().replace("zoneLabel: topology.kubernetes.io/zone", "zoneLabel: example/zone")
    assert "zoneLabel: example/zone" in chart_config_block(text)
    assert '"zoneLabel": "example/zone"' in rego_config(yaml.safe_load(text))
