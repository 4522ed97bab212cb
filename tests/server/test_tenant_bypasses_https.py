"""Issue 19's CREATE-shaped bypasses, judged alike by the HTTPS server and by `vgate eval`.

The server gets the object as the API server would send it to /validate (for the forged record:
after /mutate, as the server's own /mutate leaves it; for the unmutated pod: as submitted, the
mutating webhook having failed open); `vgate eval` models the chain. Both must refuse, with the
rule that stops the bypass. Each case was admitted before the fix.
"""

from __future__ import annotations

import base64
import json
import subprocess
from typing import Any

import jsonpatch
import pytest
import yaml

from helpers import POLICIES, VGATE, pod, review, shipped_config

FORGED = {"vgate.io/injected": "none", "scheduling.volcano.sh/queue-name": "default"}


def limited(memory: str, **spec: Any) -> dict[str, Any]:
    obj = pod("bypass", "ml-inference", schedulerName="volcano", **spec)
    obj["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory}}
    return obj


def forged(memory: str, **spec: Any) -> dict[str, Any]:
    """A pod claiming vgate already passed (vgate.io/injected), naming Volcano's default queue."""
    obj = limited(memory, **spec)
    obj["metadata"]["annotations"] = dict(FORGED)
    return obj


CASES = {
    # a limit above inference's 64Gi cap, in Volcano's default queue by a forged record
    "forged-record": (forged("1Ti"), True, "resources-memory-limit-cap"),
    # a priority class the inference queue does not allow, likewise
    "forged-priority": (forged("1Gi", priorityClassName="vgate-normal"), True, "scheduling-priority-class-allowed"),
    # a raw pod /mutate never saw (failurePolicy Ignore), 65Gi in a 64Gi queue
    "unmutated": (limited("65Gi"), False, "resources-memory-limit-cap"),
    # an image the runtime pulls from host Evilhost, not Docker Hub
    "registry-host": (pod("bypass", "web", schedulerName="volcano", containers=[
        {"name": "main", "image": "Evilhost/x:1"}]), True, "supply-chain-image-registry"),
}


@pytest.fixture(scope="module")
def config_text() -> str:
    return shipped_config(images={"allowedRegistries": ["docker.io/"]})


@pytest.mark.parametrize("case", list(CASES))
def test_each_bypass_is_refused_by_the_server_and_by_eval(case, config_text, start_server, tmp_path):
    obj, mutated_first, rule = CASES[case]
    server = start_server(config_text=config_text, workers=1)
    sent = obj
    if mutated_first:
        patch = server.post("/mutate", review(obj)).json()["response"].get("patch")
        sent = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(patch))) if patch else obj
    answer = server.post("/validate", review(sent)).json()["response"]
    assert answer["allowed"] is False and f"[{rule}]" in answer["status"]["message"], answer
    (tmp_path / "vgate.yaml").write_text(config_text)
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(obj))
    offline = subprocess.run([*VGATE, "eval", "--policies", str(POLICIES), "--config", str(tmp_path / "vgate.yaml"),
                              "-f", str(tmp_path / "pod.yaml"), "-o", "json"], capture_output=True, text=True,
                             timeout=120)
    verdict = json.loads(offline.stdout)[0]
    assert offline.returncode == 1 and rule in {v["rule"] for v in verdict["violations"] if v["action"] == "deny"}
