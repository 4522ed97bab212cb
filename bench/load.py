"""Load test for vgate: keep-alive HTTPS, bounded request count, configurable concurrency.

Starts `vgate serve` twice, on granian (the chosen stack) and on gunicorn (gthread), each with TLS,
the shipped config and policies, on loopback ports, and drives them one at a time with
ApacheBench (`ab`, Debian package apache2-utils): a C client, so on a 2-core machine it leaves
the server most of the CPU, where a Python client would take half. For each
endpoint it sends --requests requests over --concurrency keep-alive connections and reports
req/s, p50 and p99. The floor is the no-op GET /healthz of each server, measured in the same
run; the figures that matter are the ratios to them, because this machine is noisy.

    apt-get install apache2-utils
    python bench/load.py --requests 3000 --rounds 3 --concurrency 8
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from webhook.files.config_file import DEFAULT_CONFIG_PATH
from webhook.server.gateway import Gateway
from webhook.server.metrics import Metrics
from webhook.server.wiring import Settings, load_gateway

ROOT = Path(__file__).resolve().parent.parent
# What start_server starts: the process, its port, its CA file and its scratch folder.
Server = tuple[subprocess.Popen, int, str, tempfile.TemporaryDirectory]
CORPUS = ROOT.parent / "shared" / "corpus"


def realistic_pod() -> dict[str, Any]:
    """A 3-5 KB sensitive training pod: a real Volcano example's template, dressed as in production
    and admitted by every rule of the catalogue."""
    source = next(
        d
        for d in yaml.safe_load_all(
            (CORPUS / "volcano-examples" / "integrations_tensorflow_dist-mnist_tf-dist-mnist-example.yaml").read_text()
        )
        if d
    )
    template = copy.deepcopy(source["spec"]["tasks"][0]["template"])
    metadata = template.get("metadata") or {}
    metadata.update(name="dist-mnist-ps-0", namespace="ml-training")
    metadata["labels"] = {
        **metadata.get("labels", {}),
        "vgate.io/data-classification": "sensitive",
        "vgate.io/egress": "deny",
        "app.kubernetes.io/name": "dist-mnist",
        "app.kubernetes.io/part-of": "mnist-pipeline",
        "team": "vision-research",
        "volcano.sh/job-name": "dist-mnist",
        "volcano.sh/task-spec": "ps",
    }
    metadata["annotations"] = {
        "scheduling.k8s.io/group-name": "dist-mnist",
        "volcano.sh/job-version": "0",
        "kubectl.kubernetes.io/last-applied-configuration": "x" * 600,
    }
    spec = template["spec"]
    spec["nodeSelector"] = {
        "topology.kubernetes.io/zone": "cn-north-1a",
        "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true",
    }
    for container in spec["containers"]:
        container["env"] = [{"name": f"TF_CONFIG_{i}", "value": f"value-{i}-" + "v" * 40} for i in range(20)]
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}, {"name": "ckpt", "mountPath": "/ckpt"}]
    spec["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "mnist-data"}},
        {"name": "ckpt", "emptyDir": {}},
    ]
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # Compliant with the whole catalogue, as most admitted production pods are: every rule then
    # runs to its last check instead of the request being a denial under one catalogue only.
    spec["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000}
    for container in spec["containers"]:
        container["image"] = container["image"].split(":")[0] + "@sha256:" + "3f" * 32
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def typical_pod() -> dict[str, Any]:
    """The same pod as most workloads are: not sensitive, so the placement rules stop early."""
    pod = realistic_pod()
    for key in ("vgate.io/data-classification", "vgate.io/egress"):
        pod["metadata"]["labels"].pop(key)
    pod["spec"].pop("nodeSelector")
    for container in pod["spec"]["containers"]:
        container["image"] = container["image"].split("@")[0] + ":0.0.1"  # a tag: enough when not sensitive
    return pod


def admission_review(obj: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "bench",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": obj["metadata"]["namespace"],
                "name": obj["metadata"]["name"],
                "operation": "CREATE",
                "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
                "object": obj,
                "dryRun": False,
            },
        }
    ).encode()


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system, reaped children included) of a process and all its descendants,
    from /proc: the server's master, workers and evaluator children, not the client."""
    return sum(tree_cpu_by_role(root).values())


ROLES = ("master", "workers", "evaluators")


def tree_cpu_by_role(root: int, precise: bool = False) -> dict[str, float]:
    """``tree_cpu_seconds`` by role: the master (``root``), the evaluator children (by their command
    line) and the workers (every other descendant). What a request costs at load, part by part:
    the child's share there is not its share run serially (bench/latency_split.py).

    ``precise`` reads each live thread's nanoseconds on a CPU (``/proc/<pid>/task/*/schedstat``)
    instead of ``/proc/<pid>/stat``'s 10 ms ticks: the same quantity, for rounds too short for ticks
    (a round of 300 evaluations is ~23 ticks of a child), but without the time of threads and
    children that ended meanwhile."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            spent[int(entry.name)] = (_thread_seconds(entry) if precise
                                      else sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks)
        except (OSError, ValueError):
            continue  # exited meanwhile
        parents[int(entry.name)] = int(fields[1])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    found = dict.fromkeys(ROLES, 0.0)
    for pid in tree:
        found[_role(pid, root)] += spent.get(pid, 0.0)
    return found


def _thread_seconds(process: Path) -> float:
    return sum(int((thread / "schedstat").read_text().split()[0]) for thread in (process / "task").iterdir()) / 1e9


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "master"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "workers"
    return "evaluators" if b"webhook.policy.evaluator" in command else "workers"


def _field(pattern: str, output: str) -> str:
    """A figure ApacheBench printed; a clear stop when it printed none (ab changed or failed early)."""
    found = re.search(pattern, output)
    if found is None:
        raise SystemExit(f"ab printed no {pattern!r}:\n{output}")
    return found.group(1)


def measure(url: str, body: bytes | None, requests: int, concurrency: int, server_pid: int,
            precise: bool = False) -> dict[str, float]:
    """Run ApacheBench (C, keep-alive, count-bounded) so the client steals little of the 2 cores; the
    server's CPU per request is its process tree's CPU time over the run, divided by the requests."""
    with tempfile.TemporaryDirectory() as scratch:
        percentiles = Path(scratch) / "percentiles.csv"
        command = ["ab", "-q", "-k", "-n", str(requests), "-c", str(concurrency), "-e", str(percentiles)]
        if body is not None:
            payload = Path(scratch) / "body.json"
            payload.write_bytes(body)
            command += ["-p", str(payload), "-T", "application/json"]
        before = tree_cpu_by_role(server_pid, precise)
        output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
        after = tree_cpu_by_role(server_pid, precise)
        by_role = {role: (after[role] - before[role]) / requests * 1e6 for role in ROLES}
        failed = int(_field(r"Failed requests:\s+(\d+)", output))
        non_2xx = re.search(r"Non-2xx responses:\s+(\d+)", output)
        if failed or non_2xx:
            raise SystemExit(f"{url}: {failed} failed, {non_2xx.group(1) if non_2xx else 0} non-2xx responses")
        rows = dict(line.split(",") for line in percentiles.read_text().splitlines()[1:])
        return {
            "requests": requests,
            "rps": float(_field(r"Requests per second:\s+([\d.]+)", output)),
            "p50_ms": float(rows["50"]),
            "p99_ms": float(rows["99"]),
            "cpu_us": sum(by_role.values()),
            **{f"cpu_us_{role}": us for role, us in by_role.items()},
        }


def scratch_config(scratch: Path, forward_url: str | None = None, shipped: Path = DEFAULT_CONFIG_PATH) -> Path:
    """The shipped config (``shipped``), written in ``scratch`` with everything a bench's server writes kept
    there: its decision log (delivered to ``forward_url``, audit.forward, when given) and its hourly reports,
    with no anchor. The shipped anchorFile is under $HOME, where a run that crosses an hour would leave one
    (and `audit verify` then ask for that report's key); the server refuses one beside the evidence."""
    document = yaml.safe_load(shipped.read_text())
    document["audit"]["dir"] = str(scratch / "audit")
    if forward_url:
        document["audit"]["forward"] = {"url": forward_url}
    document["reports"].update(dir=str(scratch / "reports"), anchorFile=None)
    config = scratch / "vgate.yaml"
    config.write_text(yaml.safe_dump(document))
    return config


def worker_gateway(scratch: Path) -> Gateway:
    """A worker's own objects in this process (wiring.load_gateway: the shipped config and policies,
    the evaluator child, a decision log synced before each answer, in ``scratch``), for benches that
    time the worker's path without HTTP."""
    config = scratch_config(scratch)
    return load_gateway(Settings(str(config), str(ROOT / "policies"), hourly_reports=False), Metrics())


def start_server(
    workers: int,
    threads: int,
    policies: Path = ROOT / "policies",
    server_kind: str = "granian",
    forward_url: str | None = None,
    extra: tuple[str, ...] = (),
    output: Path | None = None,
    scratch_root: str | None = None,
    tree: Path | None = None,
) -> Server:
    """`vgate serve` on a free loopback port with the shipped config, its own certs and decision log
    (delivered to ``forward_url``, audit.forward, when given); ``extra`` arguments after the usual
    ones, its output into ``output`` (else discarded). Its scratch folder (decision log, reports,
    certs) is made in ``scratch_root``, else in the temporary folder.

    ``tree``: another checkout's code (``webhook/``), with its own shipped config and policies, run on
    this environment's Python and packages (bench/against.py); its $HOME is the scratch folder, so
    nothing it writes outside (an older tree's anchor, say) outlives the run."""
    import socket

    workdir = tempfile.TemporaryDirectory(prefix="vgate-bench-", dir=scratch_root)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = None
    if tree is not None:
        env = {**os.environ, "PYTHONPATH": str(tree), "HOME": workdir.name}
        policies = tree / "policies" if policies == ROOT / "policies" else policies
    shipped = tree / "webhook" / "files" / "defaults" / "vgate.yaml" if tree is not None else DEFAULT_CONFIG_PATH
    config = scratch_config(Path(workdir.name), forward_url, shipped)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--config",
            str(config),
            "--policies",
            str(policies),
            "--certs",
            f"{workdir.name}/certs",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--server",
            server_kind,
            *extra,
        ],
        cwd=workdir.name,
        env=env,
        stdout=output.open("wb") if output else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
    )
    ca = f"{workdir.name}/certs/ca.crt"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            connection = http.client.HTTPSConnection(
                "127.0.0.1", port, context=ssl.create_default_context(cafile=ca), timeout=2
            )
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return server, port, ca, workdir
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("vgate serve did not become ready")


RATIO_KEYS = ("cpu_us", "cpu_us_workers", "cpu_us_evaluators", "rps", "p50_ms")


def paired_rounds(servers: dict[str, Server], path: str, body: bytes, rounds: int, requests: int, concurrency: int,
                  precise: bool = False) -> dict[str, list[dict[str, float]]]:
    """Each server's figures for ``path``, round by round: in each round every server in turn, in
    alternating order, so that a machine slowing down mid-run slows each alike; every worker and
    evaluator child warmed first."""
    targets = {name: (f"https://127.0.0.1:{port}{path}", process.pid)
               for name, (process, port, _, _) in servers.items()}
    for url, pid in targets.values():
        measure(url, body, 500, concurrency, pid)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    for index in range(rounds):
        for name in list(targets)[:: 1 if index % 2 == 0 else -1]:
            url, pid = targets[name]
            runs[name].append(measure(url, body, requests, concurrency, pid, precise))
    return runs


def ratio_line(key: str, runs: dict[str, list[dict[str, float]]], over: str, name: str) -> str:
    """``key``'s medians for ``over`` and ``name``, and the median (quartiles) of ``name``/``over`` round by
    round; rounds where ``over`` read none of it (no evaluator child serves /mutate) have no ratio."""
    base, other = ([run[key] for run in runs[which]] for which in (over, name))
    ratios = [o / b for o, b in zip(other, base, strict=True) if b]
    if len(ratios) < 2:
        return f"{key:18s} {over} {statistics.median(base):8.1f}  {name} {statistics.median(other):8.1f}  (no ratio)"
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return (f"{key:18s} {over} {statistics.median(base):8.1f}  {name} {statistics.median(other):8.1f}  "
            f"{name}/{over} {median:.3f} ({q1:.3f}–{q3:.3f})")


def stop_servers(servers: Iterable[Server]) -> None:
    """Stop what ``start_server`` started, each given time to finish its requests, and remove its scratch folder."""
    for server, _, _, workdir in servers:
        server.terminate()
        server.wait(timeout=30)
        workdir.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="requests per endpoint (bounded count)")
    parser.add_argument("--concurrency", type=int, default=8, help="keep-alive connections in flight")
    parser.add_argument("--threads", type=int, default=2, help="app threads per worker, both servers")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="server worker processes")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--results", type=Path, help="write the medians and every round's figures to this JSON "
                        "file (bench/results/load.json is the one the README and docs quote)")
    args = parser.parse_args()

    if not shutil.which("ab"):
        raise SystemExit("ab not found: apt-get install apache2-utils")
    sensitive = admission_review(realistic_pod())
    typical = admission_review(typical_pod())
    servers = {
        "granian": start_server(args.workers, args.threads, server_kind="granian"),
        "granian-flask": start_server(args.workers, args.threads, server_kind="granian-flask"),
        "gunicorn": start_server(args.workers, args.threads, server_kind="gunicorn"),
    }
    bases = {kind: f"https://127.0.0.1:{port}" for kind, (_, port, _, _) in servers.items()}
    pids = {kind: process.pid for kind, (process, _, _, _) in servers.items()}
    try:
        targets = [
            ("granian  floor GET /healthz", "granian", "/healthz", None),
            ("granian  POST /mutate   sensitive", "granian", "/mutate", sensitive),
            ("granian  POST /validate sensitive", "granian", "/validate", sensitive),
            ("granian  POST /mutate   typical", "granian", "/mutate", typical),
            ("granian  POST /validate typical", "granian", "/validate", typical),
            ("granian-flask floor GET /healthz", "granian-flask", "/healthz", None),
            ("granian-flask POST /mutate   sensitive", "granian-flask", "/mutate", sensitive),
            ("granian-flask POST /validate sensitive", "granian-flask", "/validate", sensitive),
            ("gunicorn floor GET /healthz", "gunicorn", "/healthz", None),
            ("gunicorn POST /validate sensitive", "gunicorn", "/validate", sensitive),
        ]
        for kind, base in bases.items():
            measure(base + "/validate", sensitive, 500, args.concurrency, pids[kind])  # warm every worker and thread
        print(
            f"bodies {len(sensitive)} and {len(typical)} bytes, {args.requests} requests per endpoint and round, "
            f"{args.rounds} interleaved rounds (medians shown), concurrency {args.concurrency}, "
            f"{args.workers} workers per server x {args.threads} threads, "
            f"{os.cpu_count()} cores shared with the client; one server measured at a time"
        )
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in targets}
        for _ in range(args.rounds):  # interleaved, so drift in the machine's speed hits every target alike
            for name, kind, path, payload in targets:
                rounds[name].append(measure(bases[kind] + path, payload, args.requests, args.concurrency, pids[kind]))
        results = {
            name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in rounds.items()
        }
        for name, *_ in targets:
            r = results[name]
            spread = "/".join(f"{run['rps']:.0f}" for run in rounds[name])
            cpu = "/".join(f"{run['cpu_us']:.0f}" for run in rounds[name])
            print(
                f"{name:39s} {r['rps']:8.0f} req/s   p50 {r['p50_ms']:6.2f} ms   p99 {r['p99_ms']:6.2f} ms"
                f"   server CPU {r['cpu_us']:6.0f} us/request   (rounds: {spread} req/s; {cpu} us)"
            )
        for name, kind, *_ in targets:
            if kind == "granian":
                r = results[name]
                print(f"{name:39s} server CPU by role: " + ", ".join(
                    f"{role} {r[f'cpu_us_{role}']:.0f}" for role in ROLES) + " us/request (medians)")
        floors = {kind: results[next(n for n, k, p, _ in targets if k == kind and p == "/healthz")]
                  for kind in servers}
        for name, kind, path, _ in targets:
            if path == "/healthz":
                continue
            r, own = results[name], floors[kind]
            line = f"{name:39s} throughput {r['rps'] / own['rps']:.2f}x"
            line += f", p99 {r['p99_ms'] / own['p99_ms']:.2f}x its floor"
            other = floors["gunicorn" if kind == "granian" else "granian"]
            line += f"; throughput {r['rps'] / other['rps']:.2f}x the other stack's floor"
            print(line)
        # The direct path against Flask on the same granian, same run: the ratio that matters.
        for endpoint in ("/mutate   sensitive", "/validate sensitive"):
            direct, flask = results[f"granian  POST {endpoint}"], results[f"granian-flask POST {endpoint}"]
            print(f"direct vs Flask POST {endpoint}: CPU {direct['cpu_us'] / flask['cpu_us']:.2f}x "
                  f"({direct['cpu_us']:.0f} vs {flask['cpu_us']:.0f} us/request), "
                  f"throughput {direct['rps'] / flask['rps']:.2f}x, p99 {direct['p99_ms'] / flask['p99_ms']:.2f}x")
        if args.json:
            print(json.dumps(results, indent=2))
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(json.dumps({
                "command": "python bench/load.py " + " ".join(sys.argv[1:]),
                "date": time.strftime("%Y-%m-%d", time.gmtime()), "medians": results,
                "rounds": {name: [run["cpu_us"] for run in runs] for name, runs in rounds.items()}},
                indent=2) + "\n")
    finally:
        stop_servers(servers.values())


if __name__ == "__main__":
    main()
