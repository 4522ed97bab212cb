"""The example config is written once (``defaults/vgate.yaml``); the chart and the Rego tests derive theirs.

- The chart's ``config:`` value is the example's text, indented under ``config:``, without what the
  chart places itself (``CHART_PLACES``: the exempt namespaces from its own value, the exception,
  decision log and report locations on its volumes).
- The Rego unit tests read it as ``testing.config``, the block between ``REGO_BEGIN`` and ``REGO_END``
  in ``policies/lib/testing_test.rego``: the sections the rules read, with the changes the tests
  pin (``REGO_TEST_CHANGES``). In that file, not one of its own: regorus (0.13) leaves 13 tests
  undefined when ``config`` is a rule of the same package in another file (OPA passes them).

``python deploy/render.py`` writes both; tests fail when either differs from what it would write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from .config_file import DEFAULT_CONFIG_PATH

# Top-level sections the chart sets itself (None: the whole section), or the keys in them it sets.
CHART_PLACES: dict[str, tuple[str, ...] | None] = {"exemptNamespaces": None, "exceptions": None,
                                                    "audit": ("dir",), "reports": ("dir", "key"),
                                                    "cluster": None}  # from the value clusterState
REGO_MODULE = "policies/lib/testing_test.rego"
REGO_BEGIN = "# BEGIN config generated from webhook/files/defaults/vgate.yaml by `python deploy/render.py`\n"
REGO_END = "# END config\n"
REGO_TEST_SECTIONS = ("placement", "queues", "volcano", "security", "images", "gpu", "tenancy")
# What the Rego tests pin differently from the example (RFC 6902): a queue set of their own, Volcano
# in ml-* only, the stricter capability and registry lists, one tenant.
REGO_TEST_CHANGES: list[dict[str, Any]] = [
    {"op": "replace", "path": "/queues", "value": {
        "default": "default", "byNamespace": {"ml-training": "training"},
        "bySelector": [{"queue": "training", "selector": {"matchLabels": {"vgate.io/workload": "training"}}}],
        "definitions": {
            "default": {"namespaces": ["*"], "priorityClass": "vgate-normal"},
            "training": {"namespaces": ["ml-training", "research-*"], "priorityClass": "vgate-high",
                         "allowedPriorityClasses": ["vgate-high", "vgate-normal"], "qosClass": "Guaranteed",
                         "maxMemoryLimit": "64Gi"}}}},
    {"op": "replace", "path": "/volcano/namespaces", "value": ["ml-*"]},
    {"op": "replace", "path": "/security/allowedCapabilities", "value": ["NET_BIND_SERVICE"]},
    {"op": "replace", "path": "/images/allowedRegistries", "value": ["registry.example.com/"]},
    {"op": "replace", "path": "/tenancy/namespaceTenants", "value": [{"namespaces": ["ml-training"],
                                                                      "tenant": "research"}]},
]


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """The example's top-level sections: (key, its lines); comment lines between sections are left out."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            sections.append((line.split(":", 1)[0], [line]))
        elif sections and line.startswith(" "):
            sections[-1][1].append(line)
    return sections


def chart_config_block(text: str | None = None) -> str:
    """The chart's ``config:`` value as values.yaml holds it (from ``config:`` to the file's end)."""
    text = DEFAULT_CONFIG_PATH.read_text() if text is None else text
    blocks = []
    for key, section in _sections(text):
        dropped = CHART_PLACES.get(key, ())
        if dropped is None:
            continue
        blocks.append("\n".join("  " + line for line in section
                                if not (line.startswith("  ") and line.strip().split(":", 1)[0] in dropped)))
    return "config:\n" + "\n\n".join(blocks) + "\n"


def rego_config(document: dict[str, Any]) -> str:
    """The Rego tests' config rule (between the markers), derived from the example ``document``."""
    tests = jsonpatch.apply_patch({key: document[key] for key in REGO_TEST_SECTIONS}, REGO_TEST_CHANGES)
    return f"config := {_rego_literal(tests)}\n\n"  # the blank line before the end marker: opa fmt's


def _rego_literal(value: Any) -> str:
    """``value`` as `opa fmt` writes a multi-line literal: JSON, tab-indented, a comma after each last item."""
    lines = json.dumps(value, indent="\t", sort_keys=True).splitlines()
    closing = ("}", "]")
    return "\n".join(line + "," if i + 1 < len(lines) and lines[i + 1].strip().startswith(closing)
                     and not line.endswith(("{", "[", ",")) else line for i, line in enumerate(lines))


def rego_module_with(module_text: str, config: str) -> str:
    """testing_test.rego with the block between its markers replaced by ``config``."""
    head, _, rest = module_text.partition(REGO_BEGIN)
    _, _, tail = rest.partition(REGO_END)
    return f"{head}{REGO_BEGIN}{config}{REGO_END}{tail}"


def chart_values_with(values_text: str, block: str) -> str:
    """values.yaml with its ``config:`` block (the file's last) replaced by ``block``."""
    head, _, _ = values_text.partition("\nconfig:\n")
    return head + "\n" + block


def derived_files(root: Path) -> dict[Path, str]:
    """Each file derived from the example config, with the text it must have now."""
    text = DEFAULT_CONFIG_PATH.read_text()
    values, rego = root / "charts" / "vgate" / "values.yaml", root / REGO_MODULE
    return {values: chart_values_with(values.read_text(), chart_config_block(text)),
            rego: rego_module_with(rego.read_text(), rego_config(yaml.safe_load(text)))}
