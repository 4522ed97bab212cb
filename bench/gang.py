"""A Volcano gang through the real API server and Volcano's scheduler, with vgate and without it.

Needs the e2e control plane in host mode (`e2e/cluster up`; started here if it is down). Adds
--nodes kwok nodes (zone-a, memory-encrypted, each for 300 one-CPU pods: the largest gang fits)
and a namespace `bench-gang-none` that no vgate webhook sees (vgate.io/exempt=true, the break-glass
label), with the deny-egress NetworkPolicy of `ml-training`. A round creates, for each size (--sizes)
and target in turn (order rotated round to round), one Volcano Job of that many sensitive tasks
(minAvailable = all of them: one gang, pinned to zone-a and memory-encrypted nodes, queue
`training`, priority class `vgate-high`, 1 CPU and 4 GiB each: what vgate's mutation would give,
so the two targets schedule the same pods), and times, from a watch on its pods, the create to every
pod bound (`spec.nodeName`) and to every pod Running; then deletes the Job and waits for its pods
to go. Targets:

- `none`: `bench-gang-none`, Volcano's webhooks only;
- `vgate`: `ml-training`, every vgate webhook (mutate, validate, bind) as the chart registers them;
- `vgate-every-update`: the same with the validating webhook's PodGroup matchCondition removed for
  the run (every PodGroup status write sent, as before issue 39): calls and bytes before and after.

Per run: the API server's calls to each webhook per pod (`apiserver_admission_webhook_request_total`,
reinvocations included), vgate's requests per pod by kind and operation, the AdmissionReview bytes
vgate received and the patch bytes it sent per pod (its own counters), vgate's time in its handlers
per pod (`vgate_admission_duration_seconds` sum) and CPU per pod from the create to every pod Running
(vgate's process tree, the API server's, Volcano's scheduler's and controllers', from /proc).
Medians of the rounds with their spread; vgate's share is its target's time less `none`'s, of the
same round.

    python bench/gang.py --sizes 10 100 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import re
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from peers import Client, spread  # noqa: E402

from e2e import cluster  # noqa: E402

from load import tree_cpu_seconds  # noqa: E402

TARGETS = ("none", "vgate", "vgate-every-update")
NAMESPACES = {"none": "bench-gang-none", "vgate": "ml-training", "vgate-every-update": "ml-training"}
CONDITION = "podgroup-judged-fields-changed"
ZONE, SEV = "topology.kubernetes.io/zone", "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"
IMAGE = "registry.example.com/ml/trainer@sha256:" + "9f86d081" * 8
RESOURCES = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}


def gang(name: str, size: int) -> dict[str, Any]:
    """A Volcano Job of ``size`` sensitive tasks, all needed at once."""
    spec = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "main", "image": IMAGE, "resources": RESOURCES,
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
            "nodeSelector": {ZONE: "zone-a", SEV: "true"}, "restartPolicy": "Never", "schedulerName": "volcano",
            "priorityClassName": "vgate-high"}
    labels = {"app": name, "vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"minAvailable": size, "schedulerName": "volcano", "queue": "training",
                     "priorityClassName": "vgate-high",
                     "tasks": [{"replicas": size, "name": "worker", "template": {"metadata": {"labels": labels},
                                                                                "spec": spec}}]}}


def bench_nodes(count: int) -> list[dict[str, Any]]:
    """Kwok nodes like the cluster's zone-a memory-encrypted ones, each for 300 one-CPU pods."""
    [model] = [n for n in cluster.node_objects() if n["metadata"]["name"] == "zone-a-sev-1"]
    nodes = []
    for index in range(count):
        node = copy.deepcopy(model)
        name = f"bench-gang-{index}"
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        capacity = {"cpu": "300", "memory": "1300Gi", "pods": "300"}
        node["status"] = {"capacity": capacity, "allocatable": capacity}
        nodes.append(node)
    return nodes


class Api:
    """The few API calls the bench makes, as the cluster admin, over Client's TLS context."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        connection = http.client.HTTPSConnection(cluster.HOST, cluster.APISERVER_PORT, context=self.client.context,
                                                 timeout=60)
        try:
            connection.request(method, path, json.dumps(body) if body is not None else None,
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            text = response.read()
            return response.status, json.loads(text) if text else None
        finally:
            connection.close()

    def pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        status, listed = self.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{job}")
        return listed["items"] if status == 200 else []


class PodWatch(threading.Thread):
    """When each pod of one Job was first seen bound and first seen Running (a watch, not polls). A
    watch the API server closes (under load it drops a watcher that falls behind) is resumed from
    the last resourceVersion seen, so no event is missed."""

    def __init__(self, client: Client, namespace: str, job: str, size: int) -> None:
        super().__init__(daemon=True)
        self.client, self.namespace, self.job, self.size = client, namespace, job, size
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.resumed = 0
        self.done = threading.Event()

    def run(self) -> None:
        version = ""
        while not self.done.is_set():
            connection = http.client.HTTPSConnection(cluster.HOST, cluster.APISERVER_PORT,
                                                     context=self.client.context, timeout=600)
            try:
                connection.request("GET", f"/api/v1/namespaces/{self.namespace}/pods?watch=1&"
                                          f"allowWatchBookmarks=true&labelSelector=app%3D{self.job}"
                                          + (f"&resourceVersion={version}" if version else ""))
                response = connection.getresponse()
                while not self.done.is_set() and (line := response.readline()):
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # 410 Gone: start again from the current list
                        version = ""
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self.seen(event["object"], time.monotonic())
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                pass
            finally:
                connection.close()
            self.resumed += 1

    def seen(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        if pod["spec"].get("nodeName"):
            self.bound.setdefault(name, now)
        if pod.get("status", {}).get("phase") in ("Running", "Succeeded"):
            self.running.setdefault(name, now)
        if len(self.running) >= self.size and len(self.bound) >= self.size:
            self.done.set()


def vgate_counters() -> dict[str, float]:
    """vgate's request, byte and handler-time counters, summed over its workers."""
    wanted = ("vgate_admission_requests_total{", "vgate_admission_request_bytes_total{",
              "vgate_admission_patch_bytes_total ", "vgate_admission_duration_seconds_sum{")
    counters: dict[str, float] = {}
    for line in cluster.vgate_metrics().splitlines():
        if line.startswith(wanted):
            name, labels = line.split("{", 1)[0].split(" ", 1)[0], dict(re.findall(r'(\w+)="([^"]*)"', line))
            if name == "vgate_admission_requests_total":
                name = f"{labels['endpoint']} {labels['kind']} {labels['operation']}"
            elif name == "vgate_admission_request_bytes_total":
                name = f"bytes received {labels['endpoint']}"
            elif name == "vgate_admission_duration_seconds_sum":
                name = "handler seconds"
            else:
                name = "patch bytes sent"
            counters[name] = counters.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return counters


def condition_removed(removed: bool) -> None:
    """The validating webhook's PodGroup matchCondition: as the chart renders it, or taken out."""
    configurations = [c for c in cluster.vgate_webhook_configurations()
                      if c["kind"] == "ValidatingWebhookConfiguration"]
    if removed:
        for configuration in configurations:
            for webhook in configuration["webhooks"]:
                webhook["matchConditions"] = [c for c in webhook.get("matchConditions", []) if c["name"] != CONDITION]
    cluster.apply(configurations)


def one_run(client: Client, api: Api, target: str, size: int) -> dict[str, Any]:
    namespace, name = NAMESPACES[target], f"gang-{size}-{uuid.uuid4().hex[:6]}"
    condition_removed(target == "vgate-every-update")
    time.sleep(1)  # the API server's webhook configuration informer
    pids = {component: int((cluster.RUN / "pids" / f"{component}.pid").read_text())
            for component in ("vgate", "kube-apiserver", "vc-scheduler", "vc-controller-manager")}
    calls, counters = client.webhook_calls(), vgate_counters()
    cpu = {component: tree_cpu_seconds(pid) for component, pid in pids.items()}
    watch = PodWatch(client, namespace, name, size)
    watch.start()
    time.sleep(0.2)
    started = time.monotonic()
    status, answer = api.request("POST", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs",
                                 gang(name, size))
    if status != 201:
        sys.exit(f"gang: the {size}-task Job in {namespace} was refused: {status} {str(answer)[:300]}")
    if not watch.done.wait(60 + size):
        sys.exit(f"gang: {name}: {len(watch.bound)} of {size} pods bound, {len(watch.running)} running in time")
    spent = {component: (tree_cpu_seconds(pid) - cpu[component]) * 1e6 / size for component, pid in pids.items()}
    time.sleep(3)  # the PodGroup's last status writes (Running) come after the pods: counted, not timed
    after_calls, after_counters = client.webhook_calls(), vgate_counters()
    api.request("DELETE", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{name}",
                {"propagationPolicy": "Foreground"})
    deadline = time.monotonic() + 120 + size / 5
    while api.pods(namespace, name) and time.monotonic() < deadline:
        time.sleep(1)
    bound, running = max(watch.bound.values()) - started, max(watch.running.values()) - started
    print(f"{target} {size}: all bound in {bound:.1f} s, all running in {running:.1f} s (watch resumed "
          f"{watch.resumed - 1} times)", file=sys.stderr, flush=True)
    return {"target": target, "size": size, "bound": bound, "running": running,
            "calls": {k: (v - calls.get(k, 0.0)) / size for k, v in after_calls.items() if v > calls.get(k, 0.0)},
            "vgate": {k: (v - counters.get(k, 0.0)) / size for k, v in after_counters.items()
                      if v > counters.get(k, 0.0)},
            "cpu": spent}


def report(runs: list[dict[str, Any]], sizes: list[int]) -> list[str]:
    lines = []
    for size in sizes:
        lines.append(f"Volcano Job of {size} tasks (one gang): create to all bound, to all Running; per pod: "
                     "vgate CPU, API server CPU")
        base = {r["round"]: r for r in runs if r["size"] == size and r["target"] == "none"}
        for target in TARGETS:
            mine = [r for r in runs if r["size"] == size and r["target"] == target]
            added = [r["bound"] - base[r["round"]]["bound"] for r in mine]
            lines.append(
                f"  {target:19} bound {spread([r['bound'] for r in mine], ' s')}, running "
                f"{spread([r['running'] for r in mine], ' s')}, added to bound {spread(added, ' s')}; "
                f"vgate {spread([r['cpu']['vgate'] for r in mine], ' µs', 0)}, API server "
                f"{spread([r['cpu']['kube-apiserver'] for r in mine], ' µs', 0)}")
            for key, label in (("calls", "calls per pod"), ("vgate", "vgate per pod")):
                names = sorted({n for r in mine for n in r[key]})
                figures = {n: statistics.median(r[key].get(n, 0.0) for r in mine) for n in names}
                shown = ", ".join(f"{n} {v:.2f}" if v < 100 else f"{n} {v:.0f}" for n, v in figures.items()
                                  if v >= 0.005 and ("vgate" in n or key == "vgate"))
                lines.append(f"    {label}: {shown or 'none'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=4, help="bench nodes added (300 pods each)")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    if not cluster.readiness():
        cluster.up()
    if cluster.pods_mode():
        sys.exit("gang: run it against `e2e/cluster up` (host mode): it reads vgate's process tree")
    client = Client()
    api = Api(client)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": NAMESPACES["none"], "labels": {"vgate.io/exempt": "true"}}},
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACES["vgate"]}}])
    cluster.apply([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "training"},
                    "spec": {"weight": 1, "reclaimable": True}},
                   *[cluster.deny_egress_policy(ns) for ns in set(NAMESPACES.values())], *bench_nodes(args.nodes)])
    runs: list[dict[str, Any]] = []
    try:
        for target in TARGETS:  # warm: caches, connections, the scheduler's snapshot of the new nodes
            one_run(client, api, target, 10)
        for n in range(args.rounds):
            shift = n % len(TARGETS)
            for size in args.sizes:
                for target in TARGETS[shift:] + TARGETS[:shift]:
                    runs.append({**one_run(client, api, target, size), "round": n})
            print(f"round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        condition_removed(False)
        for index in range(args.nodes):
            api.request("DELETE", f"/api/v1/nodes/bench-gang-{index}")
    print(f"{args.rounds} interleaved rounds, medians (spread in brackets)")
    print("\n".join(report(runs, args.sizes)))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
