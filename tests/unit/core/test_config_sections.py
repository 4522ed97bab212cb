"""The gateway's own config sections are typed, built in one place, and cover the schema."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest

from webhook.core.config import (
    AuditSettings,
    ClusterSettings,
    ExceptionSettings,
    PolicyReportSettings,
    ReportSettings,
    ServerSettings,
)
from webhook.files.config_file import load_config

from helpers import ROOT

SCHEMA = json.loads((ROOT / "webhook" / "files" / "config.schema.json").read_text())
SECTIONS = {("server",): ServerSettings, ("audit",): AuditSettings, ("reports",): ReportSettings,
            ("exceptions",): ExceptionSettings, ("cluster",): ClusterSettings,
            ("reports", "policyReports"): PolicyReportSettings}


@pytest.mark.parametrize("path,cls", SECTIONS.items(), ids=lambda v: v.__name__ if isinstance(v, type) else "/".join(v))
def test_every_key_of_the_schema_has_a_typed_field(path, cls):
    schema = SCHEMA
    for key in path:
        schema = schema["properties"][key]
    keys = {f.metadata.get("key") or re.sub(r"_(\w)", lambda m: m[1].upper(), f.name) for f in fields(cls)}
    assert keys == set(schema["properties"])


def test_the_sections_read_the_completed_document():
    config = load_config(None)
    assert config.server.max_body_bytes == config.document["server"]["maxBodyBytes"]
    assert config.server.client_ca is None and config.reports.policy_reports.apply is False
    assert config.audit.failure_mode == "deny" and config.exceptions.max_lifetime_days == 90


def test_only_the_config_module_reads_those_sections_raw():
    raw = re.compile(r'document\[\s*"(server|audit|reports|exceptions|cluster)"\s*\]')
    readers = {str(p.relative_to(ROOT)) for p in (ROOT / "webhook").rglob("*.py") if raw.search(p.read_text())}
    assert readers == {"webhook/core/config.py"}
