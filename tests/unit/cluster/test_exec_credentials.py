"""A kubeconfig's exec credential plugin (issue 38, item 5): run as kubectl runs it, its token sent and
asked for again once expired, its failures one readable reason. Against the real API server:
tests/e2e/test_cluster_state.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from webhook.cluster.api import ApiServer, ExecPlugin

PLUGIN = """#!/usr/bin/env python3
import json, os, sys
calls = os.path.join(os.path.dirname(__file__), "calls")
count = len(open(calls).read().splitlines()) if os.path.exists(calls) else 0
open(calls, "a").write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": f"token-{count}", "expirationTimestamp": sys.argv[1]}}))
"""


def kubeconfig(tmp_path: Path, expires: str, **exec_fields: object) -> Path:
    (tmp_path / "plugins").mkdir(exist_ok=True)
    plugin = tmp_path / "plugins" / "get-token"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                        "command": "plugins/get-token", "args": [expires],
                                                        **exec_fields}}}]}
    path = tmp_path / "config"
    path.write_text(json.dumps(config))
    return path


def bearer(api: ApiServer) -> str:
    prepared = api.session.prepare_request(requests.Request("GET", api.url + "/api"))
    return str(prepared.headers["Authorization"])


def test_a_token_is_sent_and_asked_for_again_once_it_expires(tmp_path: Path) -> None:
    with ApiServer.from_kubeconfig(kubeconfig(tmp_path, "2000-01-01T00:00:00Z")) as expired:
        assert bearer(expired) == "Bearer token-1"  # expired at once: asked again before each request
        assert bearer(expired) == "Bearer token-2"
    info = json.loads((tmp_path / "plugins" / "calls").read_text().splitlines()[0])
    assert info["spec"]["interactive"] is False and "cluster" not in info["spec"]
    (tmp_path / "plugins" / "calls").unlink()
    with ApiServer.from_kubeconfig(kubeconfig(tmp_path, "2999-01-01T00:00:00Z")) as lasting:
        assert bearer(lasting) == bearer(lasting) == "Bearer token-0"  # kept while it is valid


def test_a_plugin_that_needs_a_terminal_or_fails_says_why(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a terminal"):
        ApiServer.from_kubeconfig(kubeconfig(tmp_path, "2999-01-01T00:00:00Z", interactiveMode="Always"))
    plugin = ExecPlugin({"command": "false"}, tmp_path, {})
    with pytest.raises(ValueError, match=r"exec plugin false failed \(1\)"):
        plugin.credential()
    missing = ExecPlugin({"command": "./no-such-plugin"}, tmp_path, {})
    with pytest.raises(ValueError, match="could not run"):
        missing.credential()
