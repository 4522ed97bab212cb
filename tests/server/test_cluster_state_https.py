"""A server whose cluster state cannot be listed (the API server away, or not yet answering):
/readyz says so and why, the metric says so, and mutation falls back to the config's namespace map
(recorded as such), never to a guess. The cluster itself is in tests/e2e/test_cluster_state.py."""

from __future__ import annotations

import yaml

from webhook.files.config_file import DEFAULT_CONFIG_PATH

from helpers import free_port, pod, review


def unreachable_kubeconfig(path, ca) -> str:
    """A kubeconfig for an API server that does not listen (a closed loopback port)."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "away",
              "clusters": [{"name": "away", "cluster": {"server": f"https://127.0.0.1:{free_port()}",
                                                        "certificate-authority": str(ca)}}],
              "users": [{"name": "away", "user": {"token": "not-a-token"}}],
              "contexts": [{"name": "away", "context": {"cluster": "away", "user": "away"}}]}
    path.write_text(yaml.safe_dump(config))
    return str(path)


def cold_server(tmp_path, start_server):
    """A server watching an API server that does not listen: its cluster state stays cold."""
    (tmp_path / "ca.crt").write_text("")
    document = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    document["cluster"] = {"watch": True, "kubeconfig": unreachable_kubeconfig(tmp_path / "kubeconfig",
                                                                                 tmp_path / "ca.crt")}
    return start_server(config_text=yaml.safe_dump(document), workers=1, ready_path="/healthz")


def test_a_cold_cluster_state_is_not_ready_and_mutation_uses_the_config(tmp_path, start_server):
    server = cold_server(tmp_path, start_server)
    ready = server.session.get(server.url + "/readyz", timeout=5)
    assert ready.status_code == 503
    error = ready.json()["error"]
    # every kind not listed, in name order (an optional kind too: an API server away is not "not served")
    assert error.startswith("the cluster state has not been listed yet (cluster.watch): AdminNetworkPolicy (")
    assert "; Namespace (" in error
    assert "Connection" in error  # why: the API server refused the connection
    metrics = server.session.get(server.url + "/metrics", timeout=5).text
    assert 'vgate_cluster_cache_synced{kind="Namespace"} 0.0' in metrics
    answer = server.post("/mutate", review(pod("web", namespace="ml-training"))).json()["response"]
    assert answer["allowed"] and answer.get("patch")  # mutation does not wait for the cluster


def pod_binding(name: str, node: str) -> dict:
    """What the API server sends for a pods/binding CREATE."""
    sent = review({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "ml-training"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    sent["request"].update(resource={"group": "", "version": "v1", "resource": "pods"}, subResource="binding")
    return sent


def test_a_binding_is_refused_while_the_cluster_state_is_cold_and_the_refusal_recorded(tmp_path, start_server):
    server = cold_server(tmp_path, start_server)
    answer = server.post("/validate", pod_binding("train-0", "zone-a-sev-1")).json()["response"]
    assert not answer["allowed"] and answer["status"]["code"] == 500
    assert "cannot judge this binding: the cluster state has not been listed yet: Pod, Node" in \
        answer["status"]["message"] and "failure mode is deny" in answer["status"]["message"]
    [record] = [r for r in server.decisions() if r["kind"] == "v1/Binding"]
    assert record["decision"] == "error" and record["allowed"] is False and record["subResource"] == "binding"
    assert record["binding"] == {"pod": "train-0", "node": "zone-a-sev-1",
                                 "unknown": "the cluster state has not been listed yet: Pod, Node"}


def test_a_binding_without_cluster_watch_is_never_allowed_unjudged(start_server):
    server = start_server()  # the shipped config: cluster.watch off
    answer = server.post("/validate", pod_binding("train-0", "zone-a-sev-1")).json()["response"]
    assert not answer["allowed"]
    assert "judges bindings from the cluster state, and cluster.watch is off" in answer["status"]["message"]
