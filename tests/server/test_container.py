"""The image, built here from the repository's Dockerfile (issue 38, item 1), and run as the chart runs
its pods: uid 10001, read-only root, every capability dropped, no new privileges. The base is made
from Debian's packages (public base images cannot be pulled here) and the wheels outside the build
container (it cannot reach PyPI): e2e/image.sh. The rest of what only a container shows (the
chart's pods under podman kube play) is issue 38's next step."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from webhook.server.certs import write_certs

from helpers import ROOT, free_port

IMAGE = "localhost/vgate:test"


@pytest.fixture(scope="module")
def image() -> str:
    built = subprocess.run(["bash", str(ROOT / "e2e" / "image.sh"), IMAGE], capture_output=True, text=True,
                           timeout=900, cwd=ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    print(built.stdout.strip())  # the image and its size
    return IMAGE


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


HARDENED = ("--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges")


def test_the_image_runs_as_10001_with_no_compiler_and_no_pip_cache(image):
    version = podman("run", "--rm", *HARDENED, image, "--version")
    assert version.returncode == 0 and "vgate, version" in version.stdout, version.stderr
    inside = podman("run", "--rm", *HARDENED, "--entrypoint", "sh", image, "-c",
                    "id -u; command -v gcc cc make || true; ls /root/.cache/pip 2>/dev/null | wc -l")
    lines = inside.stdout.split()
    assert lines == ["10001", "0"], inside.stdout + inside.stderr


@pytest.fixture
def served(image, tmp_path) -> Iterator[tuple[int, Path]]:
    """`vgate serve` in the container, hardened as the chart's pod, its audit volume and certificates mounted."""
    certs, audit = tmp_path / "certs", tmp_path / "audit"
    write_certs(certs, "vgate", "vgate-system")
    audit.mkdir()
    for path in (certs, audit, *certs.iterdir()):
        subprocess.run(["chown", "10001:10001", str(path)], check=True)
    port = free_port()
    name = f"vgate-test-{port}"
    started = podman("run", "-d", "--name", name, *HARDENED, "--tmpfs", "/tmp", "-v", f"{audit}:/app/audit",
                     "-v", f"{certs}:/app/certs:ro", "-p", f"127.0.0.1:{port}:8443", image,
                     "serve", "--no-hourly-reports", "--workers", "1")
    assert started.returncode == 0, started.stderr
    try:
        yield port, tmp_path
    finally:
        podman("rm", "-f", name)


def test_the_image_serves_hardened_with_its_evaluator_child(served):
    port, tmp_path = served
    started = time.monotonic()
    ready = None
    while time.monotonic() - started < 60:
        try:
            ready = requests.get(f"https://127.0.0.1:{port}/readyz", verify=str(tmp_path / "certs" / "ca.crt"),
                                 timeout=2)
            if ready.status_code == 200:
                break
        except requests.exceptions.ConnectionError:
            time.sleep(0.1)
    assert ready is not None and ready.status_code == 200, ready.text if ready is not None else "no answer"
    print(f"ready {time.monotonic() - started:.2f} s after podman run returned")
    assert ready.json()["policyEngine"] == "rvm"  # the evaluator child compiled the policies
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "c-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
                          "namespace": "web", "userInfo": {"username": "u"},
                          "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": {"containers": [{"name": "c", "image": "nginx",
                                                              "securityContext": {"privileged": True}}]}}}}
    answer = requests.post(f"https://127.0.0.1:{port}/validate", json=review,
                           verify=str(tmp_path / "certs" / "ca.crt"), timeout=10).json()["response"]
    assert answer["allowed"] is False  # judged by the policies, in the container
    segments = list((tmp_path / "audit").glob("decisions-*.jsonl"))
    assert segments and all(p.stat().st_uid == 10001 for p in segments)


def test_a_container_stopped_while_start_up_waits_for_the_api_server_ends_on_sigterm(image, tmp_path):
    """As PID 1, a process ignores a signal it has no handler for: vgate waiting for the API server
    (--tls-secret, none answering) once let SIGTERM pass, and was killed after podman's grace period
    (exit 137), as the kubelet would after terminationGracePeriodSeconds. It now ends on SIGTERM (143)."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("token")
    (account / "ca.crt").write_text("")
    name = f"vgate-stop-{free_port()}"
    started = podman("run", "-d", "--name", name, *HARDENED, "--tmpfs", "/tmp",
                     "-v", f"{account}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                     "-e", "KUBERNETES_SERVICE_HOST=127.0.0.1", "-e", "KUBERNETES_SERVICE_PORT=9",
                     image, "serve", "--no-hourly-reports", "--tls-secret=vgate-system/vgate-tls")
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 60
        while "trying again" not in podman("logs", name).stderr and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "trying again" in podman("logs", name).stderr  # waiting for the API server
        podman("stop", "-t", "20", name, timeout=60)
        code = podman("inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip()
        assert code == "143", (code, podman("logs", name).stderr[-1500:])
    finally:
        podman("rm", "-f", name)
