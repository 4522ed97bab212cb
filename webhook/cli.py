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

from .cli_evidence import audit, report
from .core.errors import InputError, SourceError, StartError
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
        try:
            left = expires_at(previous.cert.read_bytes()) - datetime.now(timezone.utc)
            click.echo(f"the previous certificate had {left.days} days left", err=True)
        except (OSError, ValueError):
            click.echo(f"the previous certificate ({previous.cert}) could not be read: replaced", err=True)
    reused = (Path(ca_dir) / "ca.key").is_file()
    try:
        paths = write_certs(out, service, namespace, days, ca_dir=ca_dir)
    except SourceError as error:
        raise click.ClickException(str(error)) from None
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
              help="App threads per worker: under granian, for what must not block its event loop (probes, "
                   "OPA over HTTP); under gunicorn, the request threads.")
@click.option("--server", "server_kind", type=click.Choice(["granian", "gunicorn", "granian-flask"]),
              default="granian", show_default=True,
              help="granian: slow clients cannot starve it (docs/operators.md, Serving); kept for comparison: "
                   "gunicorn (gthread), a thread per connection, and granian-flask, every request through Flask.")
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
@click.option("--tls-secret", metavar="NAMESPACE/NAME",
              help="Keep the serving certificate in this Secret instead of --certs: a CA and certificate made when "
                   "missing, renewed before they expire, the CA written into --ca-inject's webhook configurations "
                   "(the chart's default; docs/operators.md, Certificates).")
@click.option("--tls-service", default="vgate", show_default=True,
              help="With --tls-secret: the Service whose names (NAME.NAMESPACE.svc, ...) the certificate carries.")
@click.option("--tls-host", "tls_hosts", multiple=True, metavar="HOST",
              help="With --tls-secret: another name or address for the certificate (the host of webhooks.url).")
@click.option("--ca-inject", "ca_inject", multiple=True, metavar="mutating/NAME|validating/NAME",
              help="With --tls-secret: a webhook configuration whose caBundle is kept to the Secret's CAs.")
@click.option("--tls-validity", default="2160h", show_default=True, help="With --tls-secret: a certificate's life.")
@click.option("--tls-renew-before", default="720h", show_default=True,
              help="With --tls-secret: renew the certificate this long before it expires.")
@click.option("--ca-validity", default="87600h", show_default=True, help="With --tls-secret: a CA's life.")
@click.option("--ca-renew-before", default="8760h", show_default=True,
              help="With --tls-secret: add a new CA this long before the newest expires.")
@click.option("--ca-settle", default="5m", show_default=True,
              help="With --tls-secret: how long a new CA is trusted by the webhook configurations before it signs.")
def serve(config_path: str | None, policy_dir: str, cert_dir: str, bind: str, workers: int, threads: int,
          server_kind: str, access_log: bool, metrics_bind: str | None, log_format: str, opa_url: str | None,
          opa_timeout: float, hourly_reports: bool, reload_interval: float, tls_secret: str | None,
          tls_service: str, tls_hosts: tuple[str, ...], ca_inject: tuple[str, ...], tls_validity: str,
          tls_renew_before: str, ca_validity: str, ca_renew_before: str, ca_settle: str) -> None:
    """Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS with granian.

    Config, policies and exceptions are reloaded without a restart on SIGHUP and when their files
    change; an invalid new set is refused and the old one keeps serving. The server's connection
    settings (timeouts, connection cap, clientCA) are read at start.
    """
    from .server.draining import REPLACE_SECONDS
    from .server.launch import ServeOptions
    from .server.launch import serve as launch
    from .server.log_format import configure
    from .server.managed_certs import ManagedSettings, parse_duration

    configure(log_format=log_format)
    managed = None
    if tls_secret:
        try:
            managed = ManagedSettings(tls_secret, tls_service, tls_hosts, ca_inject, parse_duration(tls_validity),
                                      parse_duration(tls_renew_before), parse_duration(ca_validity),
                                      parse_duration(ca_renew_before), parse_duration(ca_settle))
        except ValueError as error:
            raise click.BadParameter(str(error)) from None
        problems = managed.problems(reload_interval + workers * REPLACE_SECONDS)
        if problems:
            raise click.BadParameter("; ".join(problems))
    try:
        launch(ServeOptions(config_path, policy_dir, cert_dir, bind, workers, threads, server_kind, access_log,
                            metrics_bind, log_format, opa_url, opa_timeout, hourly_reports, reload_interval,
                            managed))
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
    from .offline.results import junit, results_json, results_text, sample_cases, unit_test_case

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
    click.echo("\n".join(results_text(tests, samples, coverage, verbose)))
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
@click.option("--kubeconfig", type=click.Path(dir_okay=False, exists=True),
              help="Read the live cluster's Namespaces (labels, Volcano queue annotations), NetworkPolicies, "
                   "Services and Pods (effective egress) into the model, as the server's cluster state does; "
                   "Namespaces among the manifests override theirs.")
@click.option("--crd", "crd_files", multiple=True, type=click.Path(dir_okay=False),
              help="A CustomResourceDefinition whose schema defaults the model applies (Volcano's ship with vgate). "
                   "Repeatable.")
def eval_manifests(files: tuple[str, ...], operation: str, namespace: str | None, user: str, output: str,
                   config_path: str | None, policy_dir: str, as_submitted: bool, with_volcano: bool,
                   volcano_config: str | None, crd_files: tuple[str, ...], volcano_admissions: str | None,
                   kubeconfig: str | None) -> None:
    """Mutate and validate manifests offline, as a cluster's admission chain delivers them.

    Exit 0 allowed, 1 denied, 2 bad input.
    """
    import json as jsonlib

    from .offline.eval_run import EvalRequest, run_eval

    try:
        verdicts, warnings = run_eval(EvalRequest(files, operation, namespace, user, config_path, policy_dir,
                                                  as_submitted, with_volcano, volcano_config, crd_files,
                                                  volcano_admissions, kubeconfig), datetime.now(timezone.utc))
    except (SourceError, InputError) as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(2)
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)
    if output == "json":
        click.echo(jsonlib.dumps([v.as_json() for v in verdicts], indent=2))
    elif output == "junit":
        from .offline.results import junit, verdict_case

        click.echo(junit(map(verdict_case, verdicts)), nl=False)
    else:
        click.echo("\n\n".join(v.as_text() for v in verdicts))
    sys.exit(0 if all(v.allowed for v in verdicts) else 1)


main.add_command(report)
main.add_command(audit)


if __name__ == "__main__":
    sys.exit(main())
