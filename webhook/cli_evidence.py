"""The evidence verbs of `vgate`: `report` writes signed hourly reports, `audit verify` checks the
decision log and the reports, `audit seal` acknowledges a torn last line, `audit scan` judges what
already runs. Parsing and printing only:
the work is in ``reports/`` (``schedule.write_hour``, ``evidence.check_evidence``, ``seals``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from .core import hours
from .core.errors import InputError, NothingToSeal, NotReportable, SourceError
from .reports.anchor import Anchor


@click.command()
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
    from .files.config_file import load_config
    from .reports.keys import ensure_key, public_key_path
    from .reports.schedule import ReportScheduler, write_hour

    if (hour_text is None) == (not catch_up) or (catch_up and reissue):
        raise click.UsageError("give --hour HOUR, or --catch-up alone")
    if reissue != (reason is not None):
        raise click.UsageError("--reissue and --reason go together: say why a signed hour is written again")
    try:
        config = load_config(config_path)
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    key = Path(config.reports.key)
    if new_key and ensure_key(key):
        click.echo(f"created report key {key}; give auditors {public_key_path(key)}", err=True)
    if not key.is_file():
        raise click.ClickException(f"{key}: no report key (create one with --new-key, or mount the key Secret)")
    snapshot = _snapshot_taker(config_path, policy_dir, config.reports.snapshot, config.cluster.kubeconfig)
    if catch_up:
        scheduler = ReportScheduler(lambda: config, lambda: Path(policy_dir), snapshot)
        try:
            written = scheduler.tick(datetime.now(timezone.utc))
        except SourceError as error:
            raise click.ClickException(str(error)) from None
        click.echo("\n".join(str(out) for out in written) or "every closed hour of the last day has its report")
        for refusal in scheduler.refused:
            click.echo(f"Error: {refusal}", err=True)
        sys.exit(1 if scheduler.refused else 0)
    hour = _hour(hour_text, "--hour")
    assert hour is not None  # --hour was given: checked above
    try:
        out = write_hour(config, policy_dir, hour, datetime.now(timezone.utc), reason, snapshot)
    except NotReportable as refusal:
        click.echo(f"Error: {refusal}", err=True)
        sys.exit(2 if refusal.usage else 1)
    except SourceError as error:  # the key, or the policies whose METADATA the report maps
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"{error.filename or config.reports.dir}: cannot write the report: "
                                   f"{error.strerror or error}") from None
    click.echo(str(out))


def _snapshot_taker(config_path: str | None, policy_dir: str, enabled: bool,
                    kubeconfig: str | None) -> Callable[[], dict[str, Any]]:
    """What the report writer calls for the hour just closed: the cluster listed and judged now
    (``background``), or why it could not be (off, or the cluster not readable)."""
    from .background.scan import run_scan
    from .background.snapshot import not_taken

    def take() -> dict[str, Any]:
        if not enabled:
            return not_taken("snapshots are off (reports.snapshot: false)")
        try:
            result, _ = run_scan(kubeconfig, config_path, policy_dir, datetime.now(timezone.utc))
        except (InputError, SourceError) as error:
            return not_taken(f"the cluster could not be read: {error}")
        return result.snapshot or not_taken("the scan made no snapshot")
    return take


@click.group()
def audit() -> None:
    """Check the decision log."""


def _hour(value: str | None, option: str) -> datetime | None:
    """`2026-12-02T10` (the CLI's form of an hour), or a usage error naming the option."""
    if value is None:
        return None
    try:
        return hours.from_label(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an hour like 2026-12-02T10", param_hint=option) from None


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
@click.option("--forwarded", type=click.Path(dir_okay=False),
              help="Check only the audit system's copy: a collector's file of the messages vgate forwarded "
                   "(rsyslog's %rawmsg% or RFC 5424 template), without the local log.")
def audit_verify(directory: str | None, config_path: str | None, first: str | None, last: str | None,
                 reports: str | None, pubkey: str | None, anchor_path: str | None, forwarded: str | None) -> None:
    """Check the decision log's hash chains, and every report: checksums, signature, its place, the
    log it signed, its link to the report before it, that every closed hour has one, and that every
    report the anchor records is still there as signed. With --forwarded, the collector's copy instead.

    Prints each problem as file[:line]: what, and exits 1 if there is any.
    """
    if forwarded is not None:
        _verify_forwarded(Path(forwarded), Path(pubkey) if pubkey else None)
    from .files.config_file import load_config
    from .reports.closed_hours import last_closed_hour
    from .reports.evidence import check_evidence
    from .reports.keys import public_key_path

    try:
        config = load_config(config_path)
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    directory = directory or config.audit.dir
    if not Path(directory).is_dir():
        raise click.ClickException(f"{directory}: no decision log directory")
    if anchor_path is not None and not Path(anchor_path).is_file():
        raise click.ClickException(f"{anchor_path}: no anchor file there")
    anchor_path = anchor_path or (config.reports.anchor_file and os.path.expanduser(config.reports.anchor_file))
    from_hour, to_hour = _hour(first, "--from"), _hour(last, "--to")
    try:
        check = check_evidence(Path(directory), Path(reports or config.reports.dir),
                               Path(pubkey) if pubkey else public_key_path(config.reports.key),
                               key_given=bool(pubkey), first=from_hour, last=to_hour,
                               until=to_hour or last_closed_hour(datetime.now(timezone.utc)),
                               anchor=Anchor(anchor_path) if anchor_path else None)
    except (InputError, SourceError) as error:
        raise click.ClickException(str(error)) from None
    for line in [*check.notes, *map(str, check.findings)]:
        click.echo(line)
    click.echo(f"{check.records} records verified, {len(check.findings)} problems")
    sys.exit(1 if check.findings else 0)


def _verify_forwarded(path: Path, pubkey: Path | None) -> None:
    """`vgate audit verify --forwarded FILE [--pubkey KEY]`: the collector's copy alone (with the key,
    every forwarded anchor line's signature too); exits 0 clean, 1 with problems."""
    from .audit.verify import Finding
    from .forward.collected import verify_forwarded
    from .reports.anchor import signature_problem
    from .reports.keys import load_public_key
    from .reports.verify import fingerprint

    try:
        check = verify_forwarded(path)
        key = load_public_key(pubkey) if pubkey else None
    except OSError as error:
        raise click.ClickException(f"{path}: cannot read the collector's copy: {error.strerror or error}") from None
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    if key is not None:
        ours = fingerprint(key)[len("SHA256:"):][:16]
        click.echo(f"anchor lines naming key {ours} checked against {pubkey}")
        others = sorted({anchor_id for (anchor_id, _), (_, _, key_id) in check.anchor.items() if key_id != ours})
        for (anchor_id, number), (line, text, key_id) in sorted(check.anchor.items()):
            problem = signature_problem(text, key) if key_id == ours else None
            if problem:
                check.findings.append(Finding(str(path), line, f"anchor {anchor_id} line {number}: {problem}"))
        if others:
            click.echo(f"anchors of other keys, not checked: {', '.join(others)}")
    else:
        click.echo("anchor lines' signatures not checked: pass --pubkey with the report key you hold")
    for finding in check.findings:
        click.echo(str(finding))
    click.echo(f"{check.records} records in {check.segments} segments and {check.anchor_lines} anchor lines verified "
               f"({check.duplicates} duplicates ignored, {check.oversize} oversize placeholders, {check.other_lines} "
               f"other lines), {len(check.findings)} problems")
    sys.exit(1 if check.findings else 0)


@audit.command("scan")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, exists=True),
              help="The cluster to scan. Default: in-cluster, as the pod's ServiceAccount.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Gateway config (default: shipped).")
@click.option("--policies", "policy_dir", default="policies", show_default=True, type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Choice(["text", "json", "junit"]), default="text", show_default=True,
              help="junit: a test case per object judged; a denial or an error is its failure.")
@click.option("--watch", is_flag=True,
              help="Keep scanning: at start, every audit.backgroundInterval, and on every change of the policies or "
                   "the config (the background audit's own process; one replica).")
@click.option("--every", help="With --watch: scan this often instead of audit.backgroundInterval (90s, 15m, 1h).")
@click.option("--publish", is_flag=True,
              help="With --watch: put each scan's findings into the cluster as PolicyReports named vgate-audit.")
@click.option("--metrics-bind", help="With --watch: serve the findings' metrics on HOST:PORT (/metrics).")
def audit_scan(kubeconfig: str | None, config_path: str | None, policy_dir: str, output: str, watch: bool,
               every: str | None, publish: bool, metrics_bind: str | None) -> None:
    """Judge every object already in the cluster against the current policies, as /validate would
    judge its CREATE (the background audit of Gatekeeper and Kyverno).

    Exit 0 nothing denied, 1 something denied, 2 bad input or a cluster that cannot be read.
    """
    from .background.render import scan_json, scan_junit, scan_text
    from .background.scan import run_scan

    if watch:
        return _watch_scans(kubeconfig, config_path, policy_dir, every, publish, metrics_bind)

    try:
        result, warnings = run_scan(kubeconfig, config_path, policy_dir, datetime.now(timezone.utc))
    except (SourceError, InputError) as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(2)
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)
    render = {"json": scan_json, "junit": scan_junit}.get(output, scan_text)
    click.echo(render(result), nl=output != "junit")
    sys.exit(1 if result.denied else 0)


def _watch_scans(kubeconfig: str | None, config_path: str | None, policy_dir: str, every: str | None, publish: bool,
                 metrics_bind: str | None) -> None:
    import logging
    import os
    import signal
    import threading

    from .background.watch import ScanMetrics, seconds_of, serve_metrics, watch_scans

    if every is not None:
        try:
            seconds_of(every)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--every") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    os.nice(10)  # a background job: where it shares cores with the webhook, the webhook goes first
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    metrics = ScanMetrics()
    if metrics_bind:
        serve_metrics(metrics, metrics_bind)
    watch_scans(kubeconfig, config_path, policy_dir, every, publish, metrics, stop)


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
        key_path = load_config(config_path).reports.key
    except SourceError as error:
        raise click.ClickException(str(error)) from None
    if not Path(key_path).is_file():
        raise click.ClickException(f"{key_path}: no report key: seals are signed where reports are")
    try:
        path = seal_segment(Path(segment), reason, load_private_key(key_path), datetime.now(timezone.utc))
    except (NothingToSeal, SourceError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(str(path))
