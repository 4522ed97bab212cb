"""deploy/ (the chart's plain rendering, applied with kustomize) and the Dockerfile."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

import deploy_invariants as check
from helpers import ROOT


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is required (kubectl kustomize renders deploy/); .ci/run checks for it"
    output = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy")], capture_output=True, text=True, check=True)
    return check.by_name([d for d in yaml.safe_load_all(output.stdout) if d])


def test_kustomize_applies_the_chart_rendering_in_a_restricted_namespace(rendered, tmp_path):
    labels = rendered["Namespace/vgate-system"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    check.deployment_runs_ready_checked_non_root_replicas(rendered, "vgate-system")
    check.webhooks_are_registered_as_designed(rendered, "vgate-system")
    check.exemptions_are_one_list(rendered, "vgate-system", tmp_path)
    check.config_is_valid_and_its_priority_classes_exist(rendered, tmp_path)
    check.replicas_append_and_only_the_report_writer_holds_the_key(rendered)
    check.only_the_control_plane_and_monitoring_reach_the_webhook(rendered)
    assert rendered["Deployment/vgate"]["spec"]["replicas"] == 3


def test_dockerfile_is_slim_non_root_and_serves():
    dockerfile = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    assert bases and all(b == "${BASE}" for b in bases)  # one base for both stages, chosen by the argument
    assert re.search(r"^ARG BASE=python:3\.11-slim$", dockerfile, re.MULTILINE)  # the published one by default
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)
    assert 'ENTRYPOINT ["vgate"]' in dockerfile and 'CMD ["serve"]' in dockerfile
    final_stage = dockerfile.split("\nFROM ")[-1]
    assert "gcc" not in final_stage and "build-essential" not in final_stage
