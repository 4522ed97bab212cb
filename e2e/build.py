"""Builds the control plane's binaries from the wrapper module in e2e/build, once.

One `go build` of every binary in one module, so the Kubernetes packages Volcano and
kube-apiserver share compile once. The result is cached under .e2e/bin with a stamp of the inputs
(go.mod, go.sum, flags); Go's own build and module caches make a rebuild after a change cheap.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "e2e" / "build"
BIN = ROOT / ".e2e" / "bin"
KUBERNETES_VERSION = "v1.34.4"

# binary name -> Go package, built in the module at e2e/build (kwok, opa, regal: their own modules and versions);
# the names are what the upstream images call them.
BINARIES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "vc-webhook-manager": "volcano.sh/volcano/cmd/webhook-manager",
    "vc-controller-manager": "volcano.sh/volcano/cmd/controller-manager",
    "vc-scheduler": "volcano.sh/volcano/cmd/scheduler",
    "kwok": "sigs.k8s.io/kwok/cmd/kwok",
    "opa": "github.com/open-policy-agent/opa",
    "regal": "github.com/styrainc/regal",
}
MODULE_OF = {"kwok": MODULE / "kwok", "opa": MODULE / "opa", "regal": MODULE / "regal"}


def _ldflags() -> str:
    """Version stamps as Kubernetes' own build sets them, so /version and `kubectl version` are real."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    stamps = {"gitVersion": KUBERNETES_VERSION, "gitMajor": major, "gitMinor": minor,
              "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z"}
    flags = [f"-X k8s.io/{pkg}.{k}={v}" for pkg in ("component-base/version", "client-go/pkg/version")
             for k, v in stamps.items()]
    return " ".join(["-s", "-w", *flags])


def _stamp() -> str:
    digest = hashlib.sha256()
    for module in (MODULE, *MODULE_OF.values()):
        for name in ("go.mod", "go.sum"):
            digest.update((module / name).read_bytes())
    digest.update(_ldflags().encode())
    digest.update(repr(sorted(BINARIES.items())).encode())
    return digest.hexdigest()


def build(force: bool = False) -> Path:
    """The folder holding every binary, built now unless the cached ones match the inputs."""
    stamp_file = BIN / "STAMP"
    stamp = _stamp()
    if not force and stamp_file.exists() and stamp_file.read_text() == stamp and all(
            (BIN / name).exists() for name in BINARIES):
        return BIN
    if shutil.which("go") is None:
        sys.exit("e2e: the 'go' command is needed to build the control plane (Go 1.26 or later)")
    staging = BIN / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    started = time.monotonic()
    print(f"e2e: building {', '.join(BINARIES)} (cold: ~10 min on 2 cores; cached after)", file=sys.stderr,
          flush=True)
    env = {**os.environ, "CGO_ENABLED": "0"}
    for name, package in BINARIES.items():
        subprocess.run(["go", "build", "-trimpath", "-tags", "selinux,notest", "-ldflags", _ldflags(),
                        "-o", str(staging / name), package], cwd=MODULE_OF.get(name, MODULE), env=env, check=True)
    for name in BINARIES:
        os.replace(staging / name, BIN / name)
    staging.rmdir()
    stamp_file.write_text(stamp)
    print(f"e2e: built in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return BIN


# The tools the unit tests run (Rego lint and format, real OPA): each built alone from its own module
# (e2e/build/opa, e2e/build/regal), so tests/unit never builds the control plane.
TOOLS = ("opa", "regal")
TOOLS_BIN = BIN / "tools"

# The peers bench/peers.py measures vgate against: built on demand, never by the e2e suite or CI.
PEERS = {
    "gatekeeper": ("github.com/open-policy-agent/gatekeeper/v3",
                   "-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=v3.23.1"),
    "kyverno": ("github.com/kyverno/kyverno/cmd/kyverno",
                "-X github.com/kyverno/kyverno/pkg/version.BuildVersion=v1.19.1"),
}
PEERS_BIN = BIN / "peers"


def build_tool(name: str) -> Path:
    """OPA's or Regal's binary alone, unless the cached one matches its module's go.mod and go.sum."""
    if name not in TOOLS:
        raise ValueError(f"{name} is not one of the tools {TOOLS}")
    return _build_alone(name, BINARIES[name], MODULE_OF[name], "-s -w", TOOLS_BIN, {})


def build_peer(name: str) -> Path:
    """Gatekeeper's or Kyverno's binary, built from its wrapper module (e2e/build/gatekeeper,
    e2e/build/kyverno) unless the cached one matches its go.mod and go.sum."""
    package, version_flag = PEERS[name]
    return _build_alone(name, package, MODULE / name, f"-s -w {version_flag}", PEERS_BIN, {"GOFLAGS": "-mod=mod"})


def _build_alone(name: str, package: str, module: Path, ldflags: str, out: Path, env: dict[str, str]) -> Path:
    """One binary from its own module into ``out``, cached by a stamp of its go.mod, go.sum and flags."""
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(b"".join((module / f).read_bytes() for f in ("go.mod", "go.sum")))
    digest.update(ldflags.encode())
    stamp_file = out / f"{name}.stamp"
    if stamp_file.exists() and stamp_file.read_text() == digest.hexdigest() and (out / name).exists():
        return out / name
    if shutil.which("go") is None:
        sys.exit(f"e2e: the 'go' command is needed to build {name} from {package} (Go 1.26 or later)")
    print(f"e2e: building {name} from {package} (cold: 1-4 min on 2 cores; cached after)", file=sys.stderr, flush=True)
    subprocess.run(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / f"{name}.new"), package],
                   cwd=module, env={**os.environ, "CGO_ENABLED": "0", **env}, check=True)
    os.replace(out / f"{name}.new", out / name)
    stamp_file.write_text(digest.hexdigest())
    return out / name
