"""`vgate test` and `vgate eval` results as CI systems read them: JUnit XML parsed by junitparser (a
real JUnit consumer), and JSON; failures carry their messages, exit codes stay as documented."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from junitparser import Failure, JUnitXml

from helpers import POLICIES, VGATE


def vgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGATE, *args], capture_output=True, text=True, timeout=300)


def parsed(text: str, tmp_path: Path) -> JUnitXml:
    path = tmp_path / "results.xml"
    path.write_text(text)
    return JUnitXml.fromfile(str(path))


def test_vgate_test_junit_has_a_case_per_rego_test_and_sample(tmp_path):
    text = vgate("test", str(POLICIES)).stdout
    expected_tests = int(text.split("tests: ")[1].split("/")[0])
    expected_samples = int(text.split("samples: ")[1].split("/")[0])
    done = vgate("test", str(POLICIES), "-o", "junit")
    assert done.returncode == 0, done.stderr
    suites = {suite.name: suite for suite in parsed(done.stdout, tmp_path)}
    assert suites["rego"].tests == expected_tests and suites["samples"].tests == expected_samples
    assert suites["rego"].failures == suites["samples"].failures == 0
    cases = {(case.classname, case.name) for case in suites["rego"]}
    assert ("data.vgate.lib.quantity_test", "test_bytes_round_up_as_quantity_value_does") in cases
    samples = {(case.classname, case.name) for case in suites["samples"]}
    assert ("security-privileged-container", "denied-privileged.yaml") in samples


def test_a_failing_rego_test_and_sample_are_junit_failures_with_their_messages(tmp_path):
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    test_file = policies / "security-privileged-container" / "policy_test.rego"
    test_file.write_text(test_file.read_text() + "\ntest_that_fails if {\n\t1 == 2\n}\n")
    sample = policies / "security-privileged-container" / "samples" / "denied-privileged.yaml"
    sample.write_text(sample.read_text().replace("privileged: true", "privileged: false"))
    done = vgate("test", str(policies), "-o", "junit")
    assert done.returncode == 1
    failed = {case.name: case for suite in parsed(done.stdout, tmp_path) for case in suite
              if any(isinstance(r, Failure) for r in case.result)}
    assert set(failed) == {"test_that_fails", "denied-privileged.yaml"}, set(failed)
    [rego_failure] = failed["test_that_fails"].result
    assert "data.vgate.rules_test.security_privileged_container.test_that_fails failed at" in rego_failure.message
    [sample_failure] = failed["denied-privileged.yaml"].result
    assert sample_failure.message.startswith("expected security-privileged-container, denied by")
    as_json = json.loads(vgate("test", str(policies), "-o", "json").stdout)
    assert as_json["passed"] is False
    assert [t["rule"] for t in as_json["tests"] if not t["passed"]] == [
        "data.vgate.rules_test.security_privileged_container.test_that_fails"]
    assert as_json["coverage"]


def test_vgate_eval_junit_fails_the_denied_manifests_only(tmp_path):
    allowed = POLICIES / "security-privileged-container" / "samples" / "allowed-unprivileged.yaml"
    denied = POLICIES / "security-privileged-container" / "samples" / "denied-privileged.yaml"
    done = vgate("eval", "-f", str(allowed), "-f", str(denied), "-o", "junit")
    assert done.returncode == 1  # a denial, as in text
    [suite] = list(parsed(done.stdout, tmp_path))
    assert suite.tests == 2 and suite.failures == 1
    outcome = {case.classname.split("/")[-1]: case.result for case in suite}
    assert outcome["allowed-unprivileged.yaml#0"] == []
    [failure] = outcome["denied-privileged.yaml#0"]
    assert failure.type == "denied" and failure.message.startswith("[security-privileged-container]")
