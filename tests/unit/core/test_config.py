"""The config loader: defaults from the schema, errors with file and line."""

from __future__ import annotations

import pytest

from webhook.core.errors import ConfigError
from webhook.files.config_file import DEFAULT_CONFIG_PATH, load_config, parse_config


def test_an_empty_mapping_gets_every_default_from_the_schema():
    config = parse_config("{}")
    assert config.document["server"] == {"maxBodyBytes": 3145728, "maxJsonDepth": 100, "failureMode": "deny",
                             "maxContainersPerPod": 256, "maxTasksPerJob": 256, "bodyReadTimeoutSeconds": 10,
                             "headerReadTimeoutSeconds": 30, "maxConnectionsPerWorker": 1024, "clientCA": None,
                             "evaluationTimeoutSeconds": 2, "policyLoadTimeoutSeconds": 20}
    assert config.qos.guaranteed_memory == "4Gi"
    assert config.queue("default").namespaces == ("*",)
    assert config.document["placement"]["zoneLabel"] == "topology.kubernetes.io/zone"


def test_shipped_example_config_loads():
    config = load_config()
    assert config.source == str(DEFAULT_CONFIG_PATH)
    assert config.queue("training").qos_class == "Guaranteed"
    assert config.priority_values["vgate-high"] == 100000


@pytest.mark.parametrize("text,line,reason", [
    ("server:\n  failureMode: maybe\n", 2, "server/failureMode: 'maybe' is not one of"),
    ("server:\n  colour: red\n", 2, "Additional properties are not allowed ('colour' was unexpected)"),
    ("queues:\n  definitions:\n    default: {priorityClass: gold}\n", 3, "priority class 'gold' has no value"),
    ("qos:\n  memory:\n    burstable:\n      request: 2Gi\n      limit: 1Gi\n", 5, "limit 1Gi is below request 2Gi"),
    ("queues:\n  bySelector:\n    - queue: nope\n      selector: {}\n", 3, "queue 'nope' is not in queues/definitions"),
    ("queues:\n  byNamespace: {team-a: gpu}\n  definitions:\n    default: {}\n    gpu: {namespaces: [team-b]}\n",
     2, "namespace 'team-a' may not use queue 'gpu'"),
    ("reports:\n  retentionDays: 183\n", 2, "183 is less than the minimum of 184"),
    ("exemptNamespaces: [kube-*]\n", 1, "exemptNamespaces/0: 'kube-*' does not match"),
    ("- a list\n", 1, "must be a mapping"),
    ("podSecurity:\n  enforce: strict\n", 2,
     "podSecurity/enforce: 'strict' is not one of ['privileged', 'baseline', 'restricted']"),
    ("podSecurity:\n  version: v1.99\n", 2, "podSecurity/version: 'v1.99' is not one of ['latest', 'v1.0', 'v1.1'"),
    ("podSecurity:\n  namespaces:\n    - namespaces: [web]\n      warn: loose\n", 4,
     "podSecurity/namespaces/0/warn: 'loose' is not one of ['privileged', 'baseline', 'restricted']"),
    ("42\n", 1, "must be a mapping"),
    ("", 1, "the config is empty"),
    ("# only a comment\n", 1, "the config is empty"),
    ("a: [1,\n", 2, "invalid YAML"),
])
def test_invalid_configs_name_the_line_and_reason(text, line, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "cfg.yaml")
    assert caught.value.file == "cfg.yaml"
    assert caught.value.line == line
    assert reason in caught.value.reason


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "absent.yaml")
