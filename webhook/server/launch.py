"""Start `vgate serve`: check everything once in the master, then hand over to granian or gunicorn.

The command line parses its options into ``ServeOptions`` and calls ``serve``; this module does the
rest in the order it must happen: the runtime directory before prometheus_client is imported, the
start-up check (an invalid file stops start-up with one line), development certificates when none
exist, the probe port, then the server that runs the workers.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass

from ..core.errors import CertificateError, StartError
from .certs import CertPaths, is_matching_pair, write_certs
from .managed_certs import ManagedSettings
from .runtime import RuntimeDir

log = logging.getLogger("vgate")


@dataclass(frozen=True)
class ServeOptions:
    """`vgate serve`'s options, as given."""

    config_path: str | None
    policy_dir: str
    cert_dir: str
    bind: str
    workers: int
    threads: int
    server_kind: str
    access_log: bool
    metrics_bind: str | None
    log_format: str
    opa_url: str | None
    opa_timeout: float
    hourly_reports: bool
    reload_interval: float
    managed: ManagedSettings | None = None  # --tls-secret: the certificate is kept in a Secret, not --certs


def serve(options: ServeOptions) -> None:
    """Run the server until SIGTERM; raise SourceError (a file) or StartError (a port) before it starts."""
    runtime = RuntimeDir.create()  # before prometheus_client is imported: every worker writes its samples there
    # As a container's PID 1, a signal without a handler is ignored: until granian installs its own,
    # SIGTERM (a pod deleted while start-up waits for the API server) must still end the process.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from .metrics import Metrics, forget_this_process
    from .wiring import Settings, build_app, load_gateway

    settings = Settings(options.config_path, options.policy_dir, options.opa_url, options.opa_timeout,
                        options.reload_interval, options.hourly_reports, options.threads,
                        direct=options.server_kind != "granian-flask")
    config = load_gateway(settings, Metrics(), audit=False).config
    server_config = config.server
    forget_this_process()
    paths = CertPaths.under(options.cert_dir)
    if options.managed:
        paths = _keep_certificate(options.managed, config.cluster.kubeconfig, runtime)
    elif not paths.exist():
        write_certs(options.cert_dir, "vgate", "vgate-system")
        log.warning("no TLS certificates in %s: generated development certificates there (CA: %s)",
                    options.cert_dir, paths.ca)
    if not is_matching_pair(*_read_pair(paths)):
        raise CertificateError(str(paths.cert), None, f"it and {paths.key} are not a certificate and its key "
                               "(run vgate certs, or mount the Secret's tls.crt and tls.key)")
    log.info("serving on https://%s with %d workers (%s)", options.bind, options.workers, options.server_kind)
    if options.server_kind == "gunicorn":
        from .gunicorn import ServeOptions as GunicornOptions
        from .gunicorn import VgateServer

        VgateServer(lambda: build_app(settings), GunicornOptions(
            bind=options.bind, workers=options.workers, threads=options.threads, certs=paths,
            access_log=options.access_log)).run()
        return
    from .granian_server import Limits
    from .granian_server import serve as serve_granian
    from .probe_port import serve_probes

    if options.metrics_bind:
        try:
            serve_probes(options.metrics_bind, runtime.serve_probes_here())
        except OSError as error:  # in use, not an address of this host, no permission
            raise StartError(f"--metrics-bind {options.metrics_bind}: cannot listen there: "
                             f"{error.strerror or error}") from None
        log.info("probes and metrics on http://%s", options.metrics_bind)
    limits = Limits(server_config.header_read_timeout_seconds, server_config.max_connections_per_worker,
                    server_config.client_ca)
    serve_granian(runtime, settings, options.bind, options.workers, paths, limits, options.access_log,
                  options.log_format)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _keep_certificate(managed: ManagedSettings, kubeconfig: str | None, runtime: RuntimeDir) -> CertPaths:
    """The serving pair kept in the Secret (``--tls-secret``), as it is after the first look."""
    from ..cluster.api import ApiServer
    from ..core.errors import CertificateManagerError
    from .managed_certs import ManagedCertificate

    keeper = ManagedCertificate(managed, lambda: ApiServer.connect(kubeconfig), runtime.root / "managed-tls")
    try:
        paths = keeper.start()
    except CertificateManagerError as error:
        raise StartError(f"--tls-secret {managed.secret}: {error}") from None
    log.info("serving the certificate kept in Secret %s", managed.secret)
    return paths


def _read_pair(paths: CertPaths) -> tuple[bytes, bytes]:
    try:
        return paths.cert.read_bytes(), paths.key.read_bytes()
    except OSError as error:
        raise CertificateError(str(error.filename or paths.cert), None,
                               f"cannot read the serving pair: {error.strerror or error}") from None
