"""Hot reload: changed files and SIGHUP swap in a new policy set; a broken one keeps the old."""

from __future__ import annotations

import re
import signal

from helpers import copy_policies, eventually, pod, review, shipped_config

BLOCK_RED = """package vgate.rules.no_red

import rego.v1

deny contains {"rule": "no-red", "msg": "pods labelled colour=red are not admitted: remove the label"} if {
\tinput.request.object.metadata.labels.colour == "red"
}
"""


def allowed_on_every_worker(server, body) -> set[bool]:
    return {server.post("/validate", body).json()["response"]["allowed"] for _ in range(12)}


def reloads(server, result: str) -> float:
    text = server.session.get(server.url + "/metrics").text
    match = re.search(rf'vgate_reloads_total{{result="{result}"}} ([0-9.]+)', text)
    return float(match.group(1)) if match else 0.0


def test_policy_changes_are_picked_up_and_broken_ones_refused(tmp_path, start_server):
    policies = copy_policies(tmp_path / "policies")
    server = start_server(policies=policies, workers=2, extra_args=("--reload-interval", "0.3"))
    red = review(pod(labels={"colour": "red"}))
    first = server.session.get(server.url + "/readyz").json()["policyRevision"]
    assert allowed_on_every_worker(server, red) == {True}
    # A healthy server says so: the gauge is the minimum over live workers only (not the master's).
    assert "vgate_config_last_reload_successful 1.0" in server.session.get(server.url + "/metrics").text

    (policies / "no-red").mkdir()
    (policies / "no-red" / "policy.rego").write_text(BLOCK_RED)
    assert eventually(lambda: allowed_on_every_worker(server, red) == {False}), server.output()
    second = server.session.get(server.url + "/readyz").json()
    assert second["policyRevision"] != first and second["lastReload"]["ok"] is True

    (policies / "no-red" / "policy.rego").write_text(BLOCK_RED.replace('== "red"', '== = "red"'))
    ready = eventually(
        lambda: (r := server.session.get(server.url + "/readyz").json())["lastReload"]["ok"] is False and r
    )
    assert ready, server.output()
    assert ready["policyRevision"] == second["policyRevision"], "the old set keeps serving"
    assert f"{policies}/no-red/policy.rego:6: expecting expression" in ready["lastReload"]["error"]
    assert allowed_on_every_worker(server, red) == {False}
    metrics = server.session.get(server.url + "/metrics").text
    assert "vgate_config_last_reload_successful 0.0" in metrics
    assert "reload failed, still serving policy revision" in server.output()


def test_sighup_reloads_in_place_and_config_changes_apply(start_server):
    server = start_server(workers=2, extra_args=("--reload-interval", "0.3"))
    assert eventually(
        lambda: server.output().count(" ready: policy revision ") == 2
    )  # a booting worker reads files anew
    before = reloads(server, "success")
    server.process.send_signal(signal.SIGHUP)
    assert eventually(lambda: reloads(server, "success") >= before + 2), server.output()  # both workers
    assert server.process.poll() is None

    text = server.config_path.read_text().replace("ml-training: training", "ml-training: batch")
    server.config_path.write_text(text)
    queue = lambda: server.post("/mutate", review(pod(namespace="ml-training"))).json()["response"]  # noqa: E731
    import base64
    import json

    def queue_is_batch() -> bool:
        patch = json.loads(base64.b64decode(queue()["patch"]))
        return all(
            op["value"].get("scheduling.volcano.sh/queue-name") == "batch"
            for op in patch
            if op["path"] == "/metadata/annotations"
        )

    assert eventually(lambda: all(queue_is_batch() for _ in range(6))), server.output()


def test_an_empty_config_is_refused_on_reload_and_the_old_one_keeps_serving(start_server):
    """An empty file (a truncated write, a wrong mount) is not "every default": that would drop the
    registry allow-list and every other setting without a word."""
    config = shipped_config(images={"allowedRegistries": ["registry.example.com/"]})
    server = start_server(workers=1, config_text=config, extra_args=("--reload-interval", "0.3"))
    untrusted = review(pod(containers=[{"name": "c", "image": "docker.io/evil/miner:latest"}]))
    assert server.post("/validate", untrusted).json()["response"]["allowed"] is False
    server.config_path.write_text("")
    ready = eventually(
        lambda: (r := server.session.get(server.url + "/readyz").json())["lastReload"]["ok"] is False and r
    )
    assert ready and "vgate.yaml:1: the config is empty" in ready["lastReload"]["error"], server.output()
    assert server.post("/validate", untrusted).json()["response"]["allowed"] is False


def test_a_policy_set_slow_to_load_is_refused_on_reload(tmp_path, start_server):
    from test_failure_modes import SLOW_AT_LOAD

    policies = copy_policies(tmp_path / "policies")
    config = shipped_config(server={"policyLoadTimeoutSeconds": 1})
    server = start_server(policies=policies, workers=1, config_text=config, extra_args=("--reload-interval", "0.3"))
    revision = server.session.get(server.url + "/readyz").json()["policyRevision"]
    (policies / "slow_load").mkdir()
    (policies / "slow_load" / "policy.rego").write_text(SLOW_AT_LOAD)
    ready = eventually(
        lambda: (r := server.session.get(server.url + "/readyz").json())["lastReload"]["ok"] is False and r
    )
    assert ready, server.output()
    assert "took longer than server.policyLoadTimeoutSeconds (1 s)" in ready["lastReload"]["error"]
    assert ready["policyRevision"] == revision
    assert server.post("/validate", review(pod())).json()["response"]["allowed"] is True


def kubelet_projection(root, files: dict[str, str], generation: int) -> None:
    """Lay ``files`` out as the kubelet projects a ConfigMap volume with items: a timestamped directory,
    the ``..data`` link swapped to it atomically, and top-level links through ``..data``."""
    import os

    stamp = root / f"..2026_12_03_00_00_0{generation}"
    for path, text in files.items():
        (stamp / path).parent.mkdir(parents=True, exist_ok=True)
        (stamp / path).write_text(text)
    temporary = root / "..data_tmp"
    temporary.symlink_to(stamp.name)
    os.replace(temporary, root / "..data")
    for top in {path.split("/")[0] for path in files}:
        if not (root / top).is_symlink():
            (root / top).symlink_to(f"..data/{top}")


def test_a_config_map_update_of_the_policies_is_picked_up(tmp_path, start_server):
    """The chart mounts the policies from a ConfigMap: the kubelet's ..data swap must reach the workers."""
    from helpers import POLICIES

    files = {p.relative_to(POLICIES).as_posix(): p.read_text() for p in POLICIES.rglob("*.rego")
             if not p.name.endswith("_test.rego")}
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    kubelet_projection(mounted, files, 1)
    server = start_server(policies=mounted, workers=1, extra_args=("--reload-interval", "0.3"))
    red = review(pod(labels={"colour": "red"}))
    assert server.post("/validate", red).json()["response"]["allowed"] is True
    kubelet_projection(mounted, {**files, "no-red/policy.rego": BLOCK_RED}, 2)
    assert eventually(lambda: server.post("/validate", red).json()["response"]["allowed"] is False), server.output()
