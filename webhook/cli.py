"""The `vgate` command: one sub-command per verb.

Exit codes: 0 success; 1 an operator's file is invalid (config, policy, certificates) or the
command failed; 2 bad usage (click's own).
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from .audit.verify import Finding
from .core import hours
from .core.errors import InputError, NothingToSeal, NotReportable, SourceError, StartError
from .reports.anchor import Anchor
from .server.certs import CertPaths, ca_bundle, expires_at, write_certs

log = logging.getLogger("vgate")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vgate")
def main() -> None:
    """vgate: policy-as-code admission gateway for Volcano-scheduled clusters."""


@main.command()
@click.option("--out", default="certs", show_default=True, type=click.Path(file_okay=False),
              help="Directory to write ca.crt, tls.crt and tls.key (0600) into.")
@click.option("--service", default="vgate", show_default=True, help="Name of the webhook's Service.")
@click.option("--namespace", default="vgate-system", show_default=True, help="Namespace of the Service.")
@click.option("--days", default=365, show_default=True, type=click.IntRange(1, 3650), help="Validity in days.")
@click.option("--ca-dir", type=click.Path(file_okay=False),
              help="The CA's own directory (ca.crt, ca.key 0600), kept apart from the serving pair. "
                   "Default: <out>.ca next to --out. An existing CA signs the new certificate: caBundle stays.")
def certs(out: str, service: str, namespace: str, days: int, ca_dir: str | None) -> None:
    """Write a serving certificate signed by the kept CA; print the base64 caBundle for the webhook configurations.

    Run it again to renew: the same CA signs the new certificate, so the caBundle does not change,
    and a running `vgate serve` picks the new pair up without a restart.
    """
    ca_dir = ca_dir or f"{out.rstrip('/')}.ca"
    previous = CertPaths.under(out)
    if previous.cert.is_file():
        left = expires_at(previous.cert.read_bytes()) - datetime.now(timezone.utc)
        click.echo(f"the previous certificate had {left.days} days left", err=True)
    reused = (Path(ca_dir) / "ca.key").is_file()
    paths = write_certs(out, service, namespace, days, ca_dir=ca_dir)
    click.echo(f"wrote {paths.ca}, {paths.cert}, {paths.key} (valid {days} days), signed by the CA in {ca_dir} "
               f"({'kept: the caBundle is unchanged' if reused else 'new: set the caBundle below'})", err=True)
    click.echo(ca_bundle(paths))


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Gateway config YAML. Default: the shipped example config.")
@click.option("--policies", "policy_dir", default="policies", show_default=True, type=click.Path(file_okay=False),
              help="Directory of Rego policies (unit tests *_test.rego are not loaded).")
@click.option("--certs", "cert_dir", default="certs", show_default=True, type=click.Path(file_okay=False),
              help="Directory holding tls.crt and tls.key; development certs are generated if none exist.")
@click.option("--bind", default="0.0.0.0:8443", show_default=True, help="HOST:PORT to serve HTTPS on.")
@click.option("--workers", default=os.cpu_count() or 1, show_default="one per core", type=click.IntRange(1, 64),
              help="Worker processes (policy evaluation scales with processes, not threads).")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 256),
              help="App threads per worker. regorus holds the GIL, so more threads add contention, not throughput.")
@click.option("--server", "server_kind", type=click.Choice(["granian", "gunicorn"]), default="granian",
              show_default=True, help="granian: slow clients cannot starve it (README, Serving); gunicorn (gthread): "
                                      "kept for comparison, a thread per connection.")
@click.option("--access-log/--no-access-log", default=False, show_default=True, help="Log every HTTP request.")
@click.option("--metrics-bind", metavar="HOST:PORT",
              help="Serve /metrics, /healthz and /readyz (plain HTTP) on this port too, for probes and Prometheus, "
                   "so the HTTPS port serves the API server alone (granian only).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Log lines on stderr: escaped text, or one JSON object per line for a log shipper.")
@click.option("--opa-url", help="Evaluate on this OPA server (Data API) instead of in process, e.g. http://127.0.0.1:8181.")
@click.option("--opa-timeout", default=2.0, show_default=True, type=click.FloatRange(0.05, 30),
              help="Seconds to wait for OPA; keep it below the webhook's timeoutSeconds.")
@click.option("--hourly-reports/--no-hourly-reports", default=True, show_default=True,
              help="Write each closed hour's compliance report from the server (one replica wins each hour).")
@click.option("--reload-interval", default=2.0, show_default=True, type=click.FloatRange(0.2, 3600),
              help="Seconds between checks for changed config, policies, exceptions (and SIGHUP).")
def serve(config_path: str | None, policy_dir: str, cert_dir: str, bind: str, workers: int, threads: int,
          server_kind: str, access_log: bool, metrics_bind: str | None, log_format: str, opa_url: str | None,
          opa_timeout: float, hourly_reports: bool, reload_interval: float) -> None:
    """Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS with granian.

    Config, policies and exceptions are reloaded without a restart on SIGHUP and when their files
    change; an invalid new set is refused and the old one keeps serving. The server's connection
    settings (timeouts, connection cap, clientCA) are read at start.
    """
    from .server.launch import ServeOptions
    from .server.launch import serve as launch
    from .server.log_format import configure

    configure(log_format=log_format)
    try:
        launch(ServeOptions(config_path, policy_dir, cert_dir, bind, workers, threads, server_kind, access_log,
                            metrics_bind, log_format, opa_url, opa_timeout, hourly_reports, reload_interval))
    except (SourceError, StartError) as error:
        raise click.ClickException(str(error)) from None


@main.command("test")
@click.argument("policy_dir", default="policies", type=click.Path(file_okay=False, exists=True))
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Gateway config whose values policies see as data.vgate.config. Default: the shipped example.")
@click.option("-v", "--verbose", is_flag=True, help="List passing tests and samples too, not only failures.")
@click.option("-o", "--output", type=click.Choice(["text", "json", "junit"]), default="text", show_default=True,
              help="junit: JUnit XML for CI (a test case per Rego test and per sample manifest).")
def test_policies(policy_dir: str, config_path: str | None, verbose: bool, output: str) -> None:
    """Run the Rego unit tests (with coverage) and check every rule's samples; exit 1 on any failure."""
    import json as jsonlib

    from .files.config_file import load_config
    from .offline.policy_tests import check_samples, run_unit_tests
    from .offline.results import junit, results_json, sample_cases, unit_test_case

    try:
        config = load_config(config_path)
        tests, coverage = run_unit_tests(policy_dir, config)
        samples = check_samples(policy_dir, config)
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    failed = sum(not t.passed for t in tests) + sum(not s.passed for s in samples)
    if output != "text":
        click.echo(jsonlib.dumps(results_json(tests, samples, coverage), indent=2) if output == "json" else
                   junit([*map(unit_test_case, tests), *sample_cases(samples)]), nl=output == "json")
        sys.exit(1 if failed or not tests else 0)
    for test in tests:
        if verbose or not test.passed:
            status = "PASS" if test.passed else "FAIL"
            detail = f" ({test.file}:{test.line}{': ' + test.error if test.error else ''})" if not test.passed else ""
            click.echo(f"{status} {test.rule}{detail}")
    for sample in samples:
        if verbose or not sample.passed:
            denied = ", ".join(sample.denied_by) or "nothing"
            disagree = "" if sample.engines_agree else " (the RVM and the interpreter decide it differently)"
            click.echo(f"{'PASS' if sample.passed else 'FAIL'} sample {sample.file}: expected {sample.expected}, "
                       f"denied by {denied}{disagree}")
    click.echo("-" * 72)
    for path, percent in sorted(coverage.items()):
        click.echo(f"coverage {percent:5.1f}% {path}")
    click.echo(f"tests: {sum(t.passed for t in tests)}/{len(tests)} passed; "
               f"samples: {sum(s.passed for s in samples)}/{len(samples)} passed")
    if failed or not tests:
        sys.exit(1)


@main.command("eval")
@click.option("-f", "--filename", "files", multiple=True, required=True,
              help="Manifest file (multi-document YAML and List objects work); '-' reads stdin. Repeatable.")
@click.option("--operation", type=click.Choice(["CREATE", "UPDATE"]), default="CREATE", show_default=True,
              help="The admission operation to simulate.")
@click.option("--namespace", help="Namespace to admit into, overriding metadata.namespace (default: 'default').")
@click.option("--user", default="vgate-eval", show_default=True, help="User name in the simulated request.")
@click.option("-o", "--output", type=click.Choice(["text", "json", "junit"]), default="text", show_default=True,
              help="junit: JUnit XML for CI (a test case per manifest; a denial or an error is its failure).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Gateway config (default: shipped).")
@click.option("--policies", "policy_dir", default="policies", show_default=True, type=click.Path(file_okay=False))
@click.option("--as-submitted", is_flag=True,
              help="Judge the objects as written, skipping the model of the API server's admission chain.")
@click.option("--with-volcano", is_flag=True,
              help="Model Volcano's own mutating webhooks for Jobs, PodGroups and Pods after vgate's.")
@click.option("--volcano-admission-config", "volcano_config", type=click.Path(dir_okay=False),
              help="Volcano's webhook admission config (resourceGroups), for its pod mutator; implies --with-volcano.")
@click.option("--volcano-enabled-admission", "volcano_admissions",
              help="Volcano's webhook-manager --enabled-admission (comma-separated paths): which of its mutators the "
                   "model applies. Default: what Volcano's chart enables (/jobs/mutate, not /podgroups/mutate), and "
                   "/pods/mutate with --volcano-admission-config (its resource groups are what that mutator applies).")
@click.option("--crd", "crd_files", multiple=True, type=click.Path(dir_okay=False),
              help="A CustomResourceDefinition whose schema defaults the model applies (Volcano's ship with vgate). "
                   "Repeatable.")
def eval_manifests(files: tuple[str, ...], operation: str, namespace: str | None, user: str, output: str,
                   config_path: str | None, policy_dir: str, as_submitted: bool, with_volcano: bool,
                   volcano_config: str | None, crd_files: tuple[str, ...], volcano_admissions: str | None) -> None:
    """Mutate and validate manifests offline, as a cluster's admission chain delivers them.

    Exit 0 allowed, 1 denied, 2 bad input.
    """
    import json as jsonlib
    from datetime import datetime, timezone

    from .files.config_file import load_config
    from .files.exception_files import load_configured_exceptions
    from .offline.chain.crd_defaults import read_crd_file
    from .offline.chain.model import Cluster
    from .offline.chain.volcano import CHART_ADMISSIONS, read_admission_config
    from .offline.eval_manifests import evaluate, load_manifests
    from .policy.regorus_engine import RegorusEngine
    from .policy.sources import load_policy_set

    try:
        config = load_config(config_path)
        engine = RegorusEngine(load_policy_set(policy_dir), config.document)
        cluster = None if as_submitted else Cluster.build(
            config.document, [crd for path in crd_files for crd in read_crd_file(path)],
            with_volcano=with_volcano or volcano_config is not None or volcano_admissions is not None,
            resource_groups=read_admission_config(volcano_config) if volcano_config else [],
            volcano_admissions=[p.strip() for p in volcano_admissions.split(",")] if volcano_admissions
            else [*CHART_ADMISSIONS, *(["/pods/mutate"] if volcano_config else [])])
        # The exceptions the server would apply: exceptions.dir of the same config.
        exceptions, rejected = load_configured_exceptions(config.document["exceptions"], datetime.now(timezone.utc))
        for error in rejected:
            click.echo(f"Warning: policy exception rejected (the server rejects it too): {error}", err=True)
        verdicts = evaluate(load_manifests(list(files)), config, engine, exceptions,
                            operation=operation, namespace=namespace, user=user, cluster=cluster)
    except (SourceError, InputError) as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(2)
    if output == "json":
        click.echo(jsonlib.dumps([v.as_json() for v in verdicts], indent=2))
    elif output == "junit":
        from .offline.results import junit, verdict_case

        click.echo(junit(map(verdict_case, verdicts)), nl=False)
    else:
        click.echo("\n\n".join(v.as_text() for v in verdicts))
    sys.exit(0 if all(v.allowed for v in verdicts) else 1)


@main.command()
@click.option("--hour", "hour_text", help="The closed UTC hour to report, e.g. 2026-12-02T10.")
@click.option("--catch-up", is_flag=True,
              help="Write every missing closed hour of the last day, then prune (the report writer's CronJob); "
                   "exit 1 if any hour is refused (one the anchor says was signed and is gone).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Gateway config (default: shipped).")
@click.option("--policies", "policy_dir", default="policies", show_default=True, type=click.Path(file_okay=False),
              help="Policies whose METADATA maps rules to severities and MLPS controls.")
@click.option("--reissue", is_flag=True, help="Write a new version of an hour already signed; the old one is kept.")
@click.option("--reason", help="Why the hour is reissued (required with --reissue; recorded in the report).")
@click.option("--new-key", is_flag=True, help="Create the report key (and .pub) if it does not exist yet.")
def report(hour_text: str | None, catch_up: bool, config_path: str | None, policy_dir: str, reissue: bool,
           reason: str | None, new_key: bool) -> None:
    """Write the signed compliance report of one closed hour under reports/YYYY/MM/DD/HH/.

    Exit 0 written, 1 refused (the hour is signed already, or the anchor says it was and it is gone,
    another writer holds the lock, no key), 2 bad usage (an hour not closed yet, or in the future).
    """
    from .core.hours import from_label as parse_hour
    from .files.config_file import load_config
    from .reports.anchor import anchor_of
    from .reports.build import build_report
    from .reports.keys import ensure_key, public_key_path
    from .reports.schedule import ReportScheduler, writer_lock

    if (hour_text is None) == (not catch_up) or (catch_up and reissue):
        raise click.UsageError("give --hour HOUR, or --catch-up alone")
    if reissue != (reason is not None):
        raise click.UsageError("--reissue and --reason go together: say why a signed hour is written again")
    try:
        document = load_config(config_path).document
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    key = Path(document["reports"]["key"])
    if new_key and ensure_key(key):
        click.echo(f"created report key {key}; give auditors {public_key_path(key)}", err=True)
    if not key.is_file():
        raise click.ClickException(f"{key}: no report key (create one with --new-key, or mount the key Secret)")
    if catch_up:
        scheduler = ReportScheduler(lambda: document, lambda: Path(policy_dir))
        written = scheduler.tick(datetime.now(timezone.utc))
        click.echo("\n".join(str(out) for out in written) or "every closed hour of the last day has its report")
        for refusal in scheduler.refused:
            click.echo(f"Error: {refusal}", err=True)
        sys.exit(1 if scheduler.refused else 0)
    try:
        hour = parse_hour(str(hour_text))
    except ValueError:
        raise click.BadParameter(f"{hour_text!r} is not an hour like 2026-12-02T10", param_hint="--hour") from None
    try:
        with writer_lock(Path(document["reports"]["dir"])) as held:
            if not held:
                raise NotReportable(f"another writer holds {document['reports']['dir']}/.writer.lock: one writer "
                                    "signs at a time; try again when it is done", usage=False)
            out = build_report(hour, document["audit"]["dir"], document["reports"]["dir"], policy_dir, key,
                               now=datetime.now(timezone.utc), reissue_reason=reason,
                               language=document["reports"]["language"], anchor=anchor_of(document))
    except NotReportable as refusal:
        click.echo(f"Error: {refusal}", err=True)
        sys.exit(2 if refusal.usage else 1)
    except OSError as error:
        raise click.ClickException(f"{error.filename or document['reports']['dir']}: cannot write the report: "
                                   f"{error.strerror or error}") from None
    click.echo(str(out))


@main.group()
def audit() -> None:
    """Check the decision log."""


def _hour(value: str | None) -> str | None:
    """`2026-12-02T10` (the CLI's form) -> `20261202T10` (the segment names' form)."""
    if value is None:
        return None
    try:
        return hours.tag(hours.from_label(value))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an hour like 2026-12-02T10") from None


@audit.command("verify")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Decision log directory. Default: audit.dir of the config.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Gateway config (default: shipped).")
@click.option("--from", "first", help="First hour to check, e.g. 2026-12-02T10 (UTC).")
@click.option("--to", "last", help="Last hour to check, inclusive.")
@click.option("--reports", type=click.Path(file_okay=False),
              help="Reports directory. Default: reports.dir of the config.")
@click.option("--pubkey", type=click.Path(dir_okay=False),
              help="The report public key you hold. Without it, the key beside the reports is trusted (and said so).")
@click.option("--anchor", "anchor_path", type=click.Path(dir_okay=False),
              help="The report writer's anchor file (a copy exported from where only the writer writes). "
                   "Default: reports.anchorFile of the config.")
def audit_verify(directory: str | None, config_path: str | None, first: str | None, last: str | None,
                 reports: str | None, pubkey: str | None, anchor_path: str | None) -> None:
    """Check the decision log's hash chains, and every report: checksums, signature, its place, the
    log it signed, its link to the report before it, that every closed hour has one, and that every
    report the anchor records is still there as signed.

    Prints each problem as file[:line]: what, and exits 1 if there is any.
    """
    from .audit.verify import verify_segments
    from .core.hours import from_label as parse_hour
    from .files.config_file import load_config
    from .reports.closed_hours import last_closed_hour
    from .reports.keys import public_key_path
    from .reports.verify import reports_expected

    try:
        document = load_config(config_path).document
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    directory = directory or document["audit"]["dir"]
    if not Path(directory).is_dir():
        raise click.ClickException(f"{directory}: no decision log directory")
    if anchor_path is not None and not Path(anchor_path).is_file():
        raise click.ClickException(f"{anchor_path}: no anchor file there")
    anchor_path = anchor_path or document["reports"].get("anchorFile")
    good, findings = verify_segments(directory, _hour(first), _hour(last))
    reports_dir = Path(reports or document["reports"]["dir"])
    public_key = Path(pubkey) if pubkey else public_key_path(document["reports"]["key"])
    until = parse_hour(last) if last else last_closed_hour(datetime.now(timezone.utc))
    anchor = Anchor(anchor_path) if anchor_path else None
    if reports_expected(reports_dir, directory, until) or pubkey or (anchor and anchor.entries()):
        # an anchor that records reports is checked even when the volume holds none: all may be erased
        findings += _verify_reports(reports_dir, public_key, bool(pubkey), first, last, directory, until, anchor)
    findings = _acknowledge_sealed(findings, public_key)
    for finding in findings:
        click.echo(str(finding))
    click.echo(f"{good} records verified, {len(findings)} problems")
    sys.exit(1 if findings else 0)


def _acknowledge_sealed(findings: list[Finding], public_key: str | Path) -> list[Finding]:
    """Torn last lines acknowledged by a valid seal are printed as such, not counted as problems."""
    from .reports.keys import load_public_key
    from .reports.seals import acknowledged

    if not Path(public_key).is_file():
        return findings
    key, problems = load_public_key(public_key), []
    for finding in findings:
        seal = acknowledged(Path(finding.file), key) if "torn" in finding.problem else None
        if seal is None:
            problems.append(finding)
        else:
            click.echo(f"{finding} -- acknowledged {seal.sealed_at}: {seal.reason}")
    return problems


@audit.command("seal")
@click.argument("segment", type=click.Path(dir_okay=False, exists=True))
@click.option("--reason", required=True, help="Why the torn line is accepted (the crash, its ticket).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Gateway config (default: shipped).")
def audit_seal(segment: str, reason: str, config_path: str | None) -> None:
    """Acknowledge a segment's torn last line (a crash cut its last write) with a signed seal."""
    from .files.config_file import load_config
    from .reports.keys import load_private_key
    from .reports.seals import seal_segment

    try:
        key_path = load_config(config_path).document["reports"]["key"]
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    if not Path(key_path).is_file():
        raise click.ClickException(f"{key_path}: no report key: seals are signed where reports are")
    try:
        path = seal_segment(Path(segment), reason, load_private_key(key_path), datetime.now(timezone.utc))
    except NothingToSeal as error:
        raise click.ClickException(str(error)) from None
    click.echo(str(path))


def _verify_reports(reports_dir: Path, public_key: Path, given: bool, first: str | None, last: str | None,
                    directory: str, until: datetime, anchor: Anchor | None) -> list[Finding]:
    """Check the reports against a public key: the one given (--pubkey), or the one beside them, said so."""
    from .core.hours import from_label as parse_hour
    from .reports.keys import load_public_key
    from .reports.verify import fingerprint, verify_reports

    if not public_key.is_file():
        raise click.ClickException(f"{public_key}: the report public key is needed to check reports (--pubkey)")
    try:
        key_id = fingerprint(load_public_key(public_key))
    except ValueError as error:
        raise click.ClickException(f"{public_key}: {error}") from None
    trust = "the key you gave" if given else "the key beside the reports, trusted: pass --pubkey with the key you hold"
    click.echo(f"report key {public_key} {key_id} ({trust})")
    if anchor is None:
        click.echo("no anchor (reports.anchorFile is null): reports deleted or rolled back together with their "
                   "log cannot be found")
    else:
        click.echo(f"anchor {anchor.path}")
    return verify_reports(reports_dir, public_key, parse_hour(first) if first else None,
                          parse_hour(last) if last else None, audit_dir=directory, until=until, anchor=anchor)


if __name__ == "__main__":
    sys.exit(main())
