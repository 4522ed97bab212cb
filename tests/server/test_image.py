"""What the image does, checked without a container engine (none on these machines).

The Dockerfile's final stage installs vgate's wheel into a clean Python and runs `vgate serve` as
uid 10001 with a read-only root. This builds the same wheel, installs it into a fresh venv that
uid 10001 cannot write (root-owned), lays out /app as the image does (policies, the writable
volumes beside them), and serves as uid 10001 from there: /readyz must answer over HTTPS.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from webhook.server.certs import write_certs

from helpers import POLICIES, ROOT, free_port

UID = 10001


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """pytest's tmp_path sits under a 0700 directory uid 10001 cannot enter."""
    path = Path(tempfile.mkdtemp(prefix="vgate-image-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_wheel_serves_as_an_unprivileged_user_from_a_read_only_install(world_readable_dir):
    assert os.geteuid() == 0, "switching to uid 10001 needs root (CI runs as root)"
    tmp_path = world_readable_dir
    wheels, venv, app = tmp_path / "wheels", tmp_path / "venv", tmp_path / "app"
    # From what the Dockerfile copies, as it copies it: a build from the checkout could take modules from
    # a stale build/ the package list no longer names (webhook.forward went missing from the wheel so).
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "webhook", source / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
                   check=True, capture_output=True)
    # The system Python, as the image's: a pyenv interpreter under /root is out of uid 10001's reach.
    python = shutil.which("python3.11", path="/usr/local/bin:/usr/bin")
    assert python, "a system python3.11 (apt-get install python3.11-venv) is needed to build the clean venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *map(str, wheels.glob("vgate-*.whl"))],
                   check=True, capture_output=True)
    shutil.copytree(POLICIES, app / "policies", ignore=shutil.ignore_patterns("*_test.rego", "samples"))
    write_certs(app / "certs", "vgate", "vgate-system")
    for writable in ("audit", "reports", "keys", "exceptions", "home", "tmp"):
        (app / writable).mkdir()
    for path in [app / d for d in ("audit", "reports", "keys", "exceptions", "home", "tmp", "certs")]:
        for item in [path, *path.rglob("*")]:
            os.chown(item, UID, UID)
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - the server's output, for as long as it runs
    server = subprocess.Popen(
        ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", str(venv / "bin" / "vgate"), "serve",
         "--policies", "policies", "--certs", "certs", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--no-hourly-reports"],
        cwd=app, stdout=log, stderr=subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(app / "home"), "TMPDIR": str(app / "tmp")})
    try:
        ready = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                ready = requests.get(f"https://127.0.0.1:{port}/readyz", verify=str(app / "certs" / "ca.crt"),
                                     timeout=2)
                break
            except requests.exceptions.ConnectionError:
                time.sleep(0.3)
        output = (tmp_path / "serve.log").read_text(errors="replace")
        assert ready is not None and ready.status_code == 200, output
        assert ready.json()["policyEngine"] == "rvm"
        owners = {item.stat().st_uid for item in (app / "audit").rglob("*")}
        assert owners <= {UID}
        assert not list((venv / "lib").rglob("*.pyc.*")), "nothing was written into the install"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
