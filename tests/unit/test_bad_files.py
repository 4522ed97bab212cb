"""Every user-facing command, given each kind of bad file it reads (a config, a policy, a report key, a
certificate, a manifest): one line naming the file and what is wrong, the documented exit code, and
never a traceback. A malformed report key reached users as cryptography's traceback before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import POLICIES, VGATE, anchor_beside

SAMPLE = POLICIES / "network-no-external" / "samples" / "denied-no-egress-label.yaml"


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of bad files: config, policy, report keys, serving pair and CA, manifest, and a good
    config pointing at the bad key."""
    root = tmp_path_factory.mktemp("bad")
    (root / "config.yaml").write_text("server: [\n")
    (root / "policies" / "broken").mkdir(parents=True)
    (root / "policies" / "broken" / "policy.rego").write_text("package broken\n\ndeny contains msg if { msg := \n")
    (root / "keys").mkdir()
    (root / "keys" / "report.key").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    (root / "keys" / "report.key.pub").write_text("garbage\n")
    (root / "certs").mkdir()
    for name in ("tls.crt", "tls.key", "ca.crt", "ca.key"):
        (root / "certs" / name).write_text("garbage\n")
    (root / "manifest.yaml").write_text("kind: [\n")
    (root / "decisions").mkdir()
    (root / "segment.jsonl").write_text('{"torn": \n')
    (root / "key-config.yaml").write_text(
        f"audit: {{dir: {root / 'decisions'}}}\n"
        f"reports: {{dir: {root / 'reports'}, key: {root / 'keys' / 'report.key'}, "
        f"anchorFile: {anchor_beside(root)}}}\n")
    (root / "forward-https.yaml").write_text("audit:\n  forward:\n    url: https://collector.example:443\n")
    (root / "anchor-in-evidence.yaml").write_text(  # the old default layout: the anchor beside audit/
        f"audit: {{dir: {root / 'decisions'}}}\n"
        f"reports: {{dir: {root / 'reports'}, key: {root / 'keys' / 'report.key'}, "
        f"anchorFile: {root / 'anchor' / 'reports-anchor.jsonl'}}}\n")
    return root


# (command line with {bad} for the folder, exit code, the file the line must name, what it must say)
CASES = [
    ("serve --config {bad}/config.yaml", 1, "config.yaml:2", "invalid YAML"),
    ("serve --policies {bad}/policies", 1, "policy.rego:3", ""),
    ("serve --policies {policies} --certs {bad}/certs --bind 127.0.0.1:1", 1, "certs/tls.crt",
     "are not a certificate and its key"),
    ("test {bad}/policies", 1, "policy.rego:3", ""),
    ("test --config {bad}/config.yaml {policies}", 1, "config.yaml:2", "invalid YAML"),
    ("eval --config {bad}/config.yaml -f {sample}", 2, "config.yaml:2", "invalid YAML"),
    ("eval --policies {bad}/policies -f {sample}", 2, "policy.rego:3", ""),
    ("eval --policies {policies} -f {bad}/manifest.yaml", 2, "manifest.yaml:2", "invalid YAML"),
    ("report --config {bad}/config.yaml --hour 2026-12-03T10", 1, "config.yaml:2", "invalid YAML"),
    ("report --config {bad}/key-config.yaml --hour 2026-12-03T10", 1, "keys/report.key",
     "not an Ed25519 private key in PEM"),
    ("serve --config {bad}/anchor-in-evidence.yaml --policies {policies}", 1, "anchor-in-evidence.yaml",
     "reports.anchorFile " + "{bad}/anchor/reports-anchor.jsonl is inside {bad}, which holds audit.dir"),
    ("report --config {bad}/anchor-in-evidence.yaml --hour 2026-12-03T10", 1, "anchor-in-evidence.yaml",
     "on the same mount: whoever can write the evidence could rewrite the anchor too"),
    ("serve --config {bad}/forward-https.yaml", 1, "forward-https.yaml:3", "audit/forward/url: 'https://"),
    ("audit verify --config {bad}/config.yaml", 1, "config.yaml:2", "invalid YAML"),
    ("audit verify --config {bad}/key-config.yaml", 1, "keys/report.key.pub", "not an Ed25519 public key in PEM"),
    ("audit seal --config {bad}/config.yaml --reason crash {bad}/segment.jsonl", 1, "config.yaml:2", "invalid YAML"),
    ("audit seal --config {bad}/key-config.yaml --reason crash {bad}/segment.jsonl", 1, "keys/report.key",
     "not an Ed25519 private key in PEM"),
    ("certs --out {bad}/out --ca-dir {bad}/certs", 1, "certs/ca.", "not the kept CA's"),
]


@pytest.mark.parametrize(("command", "code", "names", "says"), CASES, ids=[c[0].split(" {")[0] + " " + c[2]
                                                                           for c in CASES])
def test_each_command_answers_a_bad_file_in_one_line(bad: Path, command: str, code: int, names: str,
                                                     says: str) -> None:
    args = command.format(bad=bad, policies=POLICIES, sample=SAMPLE).split()
    result = subprocess.run([*VGATE, *args], capture_output=True, text=True, timeout=120, cwd=bad)
    lines = [line for line in result.stderr.splitlines() if line.strip() and " INFO " not in line
             and " WARNING " not in line]  # serve's start-up log lines come before its error
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    says = says.format(bad=bad)
    assert lines[0].startswith("Error: ") and names in lines[0] and says in lines[0], lines[0]
