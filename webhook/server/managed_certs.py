"""vgate's own serving certificate, kept in a Secret and trusted through the webhook configurations.

The chart's default install (neither a given CA nor cert-manager) works the way Gatekeeper's
cert-controller and Kyverno do: the replicas make a CA and a serving certificate, keep both in one
Secret the chart creates empty, renew them before they expire, and write the CAs into the
``caBundle`` of the webhook configurations they are told to, so nobody runs ``vgate certs`` or
pastes a bundle. Every replica checks every ``CHECK_SECONDS``; the Secret's resourceVersion makes
concurrent replicas agree (the one whose update lands wins; the others read it on their next look).

No admission may fail across a renewal, so the order is fixed. The Secret's ``ca.crt`` is a bundle
of every CA not yet expired and ``ca.key`` their keys. A new CA joins the bundle, and the bundle is
written into the webhook configurations, ``ca_settle`` before it signs anything: by then the API
server trusts it. A replica writes a bundle into the configurations before it serves a certificate
from it, and serves only a certificate one of them signed. Renewing the serving certificate alone
changes nothing the API server holds.

What it may touch is what the chart's RBAC grants: get and update on its one Secret, get and patch
on its named webhook configurations.
"""

from __future__ import annotations

import base64
import datetime
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..cluster.api import ApiServer
from ..core.errors import CertificateManagerError
from .certs import (
    BACKDATE,
    CertPaths,
    new_ca,
    private_pem,
    same_public_key,
    service_names,
    sign_serving,
    write_atomically,
)
from .periodic import every

log = logging.getLogger("vgate")
CHECK_SECONDS = 5.0
START_SECONDS = 60.0  # how long start-up waits for the API server before giving up with one line
_WEBHOOK_KINDS = {"mutating": "mutatingwebhookconfigurations", "validating": "validatingwebhookconfigurations"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


def parse_duration(text: str) -> datetime.timedelta:
    """``2160h``, ``90m``, ``1h30m``, ``45s`` (cert-manager's and Go's notation, hours at most)."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"{text!r} is not a duration such as 2160h, 30m or 45s")
    seconds = {"h": 3600, "m": 60, "s": 1}
    return datetime.timedelta(seconds=sum(float(n) * seconds[u] for n, u in parts))


@dataclass(frozen=True)
class ManagedSettings:
    """Where the certificate lives, what it names, who must trust it, and how long each part lives."""

    secret: str                       # NAMESPACE/NAME
    service: str                      # the Service's name: NAME, NAME.NS, NAME.NS.svc, ... in the certificate
    hosts: tuple[str, ...] = ()       # more names or addresses (the host of webhooks.url)
    inject: tuple[str, ...] = ()      # mutating/NAME, validating/NAME: their webhooks get the bundle
    validity: datetime.timedelta = datetime.timedelta(days=90)
    renew_before: datetime.timedelta = datetime.timedelta(days=30)
    ca_validity: datetime.timedelta = datetime.timedelta(days=3650)
    ca_renew_before: datetime.timedelta = datetime.timedelta(days=365)
    ca_settle: datetime.timedelta = datetime.timedelta(minutes=5)

    def problems(self, serving_seconds: float = 0.0) -> list[str]:
        """What makes these settings unable to renew in time (empty when they can), for a server that
        takes ``serving_seconds`` to serve a new pair once written (``vgate serve``: it notices it within
        --reload-interval, then replaces its workers one by one)."""
        found = []
        if self.secret.count("/") != 1 or not all(self.secret.split("/")):
            found.append(f"--tls-secret {self.secret!r}: NAMESPACE/NAME")
        for target in self.inject:
            kind, _, name = target.partition("/")
            if kind not in _WEBHOOK_KINDS or not name:
                found.append(f"--ca-inject {target!r}: mutating/NAME or validating/NAME")
        if self.renew_before >= self.validity:
            found.append("--tls-renew-before must be shorter than --tls-validity")
        least = max(3 * CHECK_SECONDS, 2 * CHECK_SECONDS + serving_seconds)
        if self.renew_before.total_seconds() < least:
            serving = (f", and serve a new pair within {serving_seconds:g}s: --reload-interval, then each of "
                       "--workers replaced in turn") if serving_seconds else ""
            found.append(f"--tls-renew-before must be at least {least:g}s (replicas look every "
                         f"{CHECK_SECONDS:g}s{serving})")
        if self.ca_renew_before >= self.ca_validity:
            found.append("--ca-renew-before must be shorter than --ca-validity")
        if self.ca_settle + self.validity > self.ca_renew_before:
            found.append("--ca-renew-before must exceed --ca-settle plus --tls-validity: the old CA must outlive "
                         "the last certificate it signs")
        return found

    @property
    def namespace(self) -> str:
        return self.secret.split("/")[0]

    @property
    def names(self) -> list[str]:
        return [*service_names(self.service, self.namespace), "127.0.0.1", *self.hosts]


@dataclass
class _Material:
    """The Secret's contents, parsed: the CAs (newest first) with their keys, and the serving pair."""

    cas: list[tuple[x509.Certificate, ec.EllipticCurvePrivateKey]]
    cert: x509.Certificate | None
    key: ec.EllipticCurvePrivateKey | None

    @classmethod
    def of(cls, data: dict[str, str]) -> _Material:
        """Whatever in ``data`` parses and belongs together; anything else is dropped (and remade)."""
        certs = _certificates(data.get("ca.crt"))
        keys = [k for k in _keys(data.get("ca.key")) if isinstance(k, ec.EllipticCurvePrivateKey)]
        cas = [(c, k) for c in certs for k in keys if same_public_key(c, k)]
        served = _certificates(data.get("tls.crt"))
        key = next(iter(_keys(data.get("tls.key"))), None)
        cert = served[0] if served else None
        if cert is None or not isinstance(key, ec.EllipticCurvePrivateKey) or not same_public_key(cert, key):
            cert, key = None, None  # no pair: a new one is signed
        return cls(sorted(cas, key=lambda pair: pair[0].not_valid_before_utc, reverse=True), cert, key)

    def data(self) -> dict[str, str]:
        """The Secret's data: base64 of the PEM bundles."""
        assert self.cert is not None and self.key is not None
        pem = serialization.Encoding.PEM
        fields = {"ca.crt": b"".join(c.public_bytes(pem) for c, _ in self.cas),
                  "ca.key": b"".join(private_pem(k) for _, k in self.cas),
                  "tls.crt": self.cert.public_bytes(pem), "tls.key": private_pem(self.key)}
        return {name: base64.b64encode(value).decode("ascii") for name, value in fields.items()}

    def bundle(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c, _ in self.cas)

    def signer_of(self, cert: x509.Certificate) -> x509.Certificate | None:
        return next((c for c, _ in self.cas if c.subject == cert.issuer and _signed_by(cert, c)), None)


class ManagedCertificate:
    """One replica's keeper of the serving certificate: renews it in the Secret, injects the CAs,
    and writes the pair this replica serves into ``directory`` (which ``ServingPair`` watches)."""

    def __init__(self, settings: ManagedSettings, connect: Callable[[], ApiServer], directory: Path) -> None:
        self.settings = settings
        self.connect = connect
        self.paths = CertPaths.under(directory)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.secret_path = f"/api/v1/namespaces/{settings.namespace}/secrets/{settings.secret.split('/')[1]}"
        self._api: ApiServer | None = None
        self._served = b""

    def start(self) -> CertPaths:
        """The first look; then a look every ``CHECK_SECONDS``. An API server that does not answer is
        waited for up to ``START_SECONDS``; a refusal (403, a missing Secret) stops start-up at once."""
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                self.look()
                break
            except CertificateManagerError as error:
                if not error.transient or time.monotonic() > deadline:
                    raise
                log.warning("%s; trying again", error)
                time.sleep(CHECK_SECONDS)
        every(CHECK_SECONDS, self._look_logged, "vgate-managed-certificate")
        return self.paths

    def _look_logged(self) -> None:
        try:
            self.look()
        except CertificateManagerError as error:
            log.error("%s; the current certificate keeps serving", error)

    def look(self) -> None:
        """Renew what is due in the Secret, make the webhook configurations trust its CAs, then serve
        its pair (in that order); raise CertificateManagerError, one line, when the API server says no."""
        for _ in range(3):  # another replica's update landed first: read theirs
            secret = self._call("get", self.secret_path, missing_ok=True)
            if secret is None:
                raise CertificateManagerError(f"Secret {self.settings.secret} does not exist: create it empty (the "
                                              "chart does); vgate may only read and update it")
            material = _Material.of(secret.get("data") or {})
            if not self._renew(material, datetime.datetime.now(datetime.timezone.utc)):
                break
            secret["data"] = material.data()
            secret["type"] = secret.get("type", "Opaque")
            if self._call("put", self.secret_path, secret, conflict_ok=True) is not None:
                log.info("renewed the serving certificate in Secret %s (until %s; %d CA(s) trusted)",
                         self.settings.secret, material.cert.not_valid_after_utc.isoformat()
                         if material.cert else "?", len(material.cas))
                break
        else:
            raise CertificateManagerError(f"Secret {self.settings.secret}: updated by others three times in a row")
        bundle = material.bundle()
        for target in self.settings.inject:
            self._inject(target, base64.b64encode(bundle).decode("ascii"))
        self._serve(material, bundle)

    def _renew(self, material: _Material, now: datetime.datetime) -> bool:
        """Make the CA and certificate that are due at ``now`` (in ``material``); True when anything changed."""
        settings = self.settings
        changed = False
        alive = [(c, k) for c, k in material.cas if c.not_valid_after_utc > now]
        if len(alive) != len(material.cas):
            material.cas, changed = alive, True
        if not material.cas or material.cas[0][0].not_valid_after_utc - now < settings.ca_renew_before:
            # named by when it was made: the bundle's CAs must differ by name for a client to tell them apart
            ca = new_ca(f"vgate CA for {settings.service}.{settings.namespace} {now:%Y%m%dT%H%M%SZ}",
                        now, settings.ca_validity / datetime.timedelta(days=1))
            material.cas.insert(0, ca)
            changed = True
        if self._needs_new_certificate(material, now):
            ca_cert, ca_key = self._signer(material, now)
            material.cert, material.key = sign_serving(
                ca_cert, ca_key, f"{settings.service}.{settings.namespace}.svc", settings.names,
                min(now + settings.validity, ca_cert.not_valid_after_utc))
            changed = True
        return changed

    def _signer(self, material: _Material,
                now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """The newest CA in the webhook configurations for ``ca_settle``; before any has been, the CA that
        signed the certificate being served (trusted exactly as far as that one is: a fresh install
        whose first certificate is due before its CA settles, as with lifetimes shorter than
        ``ca_settle``); with nothing served, the newest (nothing trusts any CA yet)."""
        settled = [(c, k) for c, k in material.cas if now - _joined(c) >= self.settings.ca_settle]
        if settled:
            return settled[0]
        serving = material.signer_of(material.cert) if material.cert is not None else None
        return next(((c, k) for c, k in material.cas if c is serving), material.cas[0])

    def _needs_new_certificate(self, material: _Material, now: datetime.datetime) -> bool:
        cert = material.cert
        if cert is None or material.signer_of(cert) is None:
            return True
        if cert.not_valid_after_utc - now < self.settings.renew_before:
            return True
        try:
            named = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return True
        have = {str(n.value) for n in named}
        return have != set(self.settings.names)

    def _inject(self, target: str, bundle: str) -> None:
        """Write the bundle into every webhook of one configuration whose caBundle differs."""
        kind, _, name = target.partition("/")
        path = f"/apis/admissionregistration.k8s.io/v1/{_WEBHOOK_KINDS[kind]}/{name}"
        configuration = self._call("get", path, missing_ok=True)
        if configuration is None:
            return  # not installed yet (Helm creates webhook configurations last): the next look
        patch: list[dict[str, Any]] = []
        for index, webhook in enumerate(configuration.get("webhooks") or []):
            if webhook.get("clientConfig", {}).get("caBundle") != bundle:
                patch += [{"op": "test", "path": f"/webhooks/{index}/name", "value": webhook["name"]},
                          {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle}]
        if patch:
            self._call("patch", path, patch)
            log.info("wrote the CA bundle into %s/%s", kind, name)

    def _serve(self, material: _Material, bundle: bytes) -> None:
        """Write the pair for ``ServingPair`` to pick up, when it is not the one already written."""
        if material.cert is None or material.key is None:
            return
        cert = material.cert.public_bytes(serialization.Encoding.PEM)
        if cert == self._served:
            return
        write_atomically(self.paths.ca, bundle, 0o644)
        write_atomically(self.paths.key, private_pem(material.key), 0o600)
        write_atomically(self.paths.cert, cert, 0o644)
        self._served = cert

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False,
              conflict_ok: bool = False) -> dict[str, Any] | None:
        """One request; None for a 404 (``missing_ok``) or a 409 (``conflict_ok``), else the object."""
        try:
            api = self._api = self._api or self.connect()
            if method == "get":
                return api.get(path, timeout=10)
            if method == "put":
                return api.replace(path, body)
            return api.json_patch(path, body)
        except requests.HTTPError as error:
            status = error.response.status_code if error.response is not None else 0
            if (status == 404 and missing_ok) or (status == 409 and conflict_ok):
                return None
            said = _status_message(error.response)
            raise CertificateManagerError(f"cannot {method} {path}: {status} {said}",
                                          transient=status == 429 or status >= 500) from None
        except (requests.RequestException, OSError, ValueError, KeyError) as error:
            self._api = None
            raise CertificateManagerError(f"cannot {method} {path}: {type(error).__name__}: {error}",
                                          transient=True) from None


def _status_message(response: requests.Response | None) -> str:
    """The API server's own reason (a Status object's message), on one line."""
    if response is None:
        return ""
    try:
        return str(response.json().get("message", response.reason)).replace("\n", " ")[:300]
    except ValueError:
        return response.reason or ""


def _certificates(field: str | None) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(base64.b64decode(field or "")) if field else []
    except ValueError:
        return []


def _keys(field: str | None) -> list[Any]:
    if not field:
        return []
    try:
        text = base64.b64decode(field).decode("ascii")
    except ValueError:
        return []
    keys = []
    for block in re.findall(r"-----BEGIN [A-Z ]+-----.+?-----END [A-Z ]+-----", text, re.S):
        try:
            keys.append(serialization.load_pem_private_key(block.encode(), password=None))
        except (ValueError, TypeError):
            continue
    return keys


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _joined(ca: x509.Certificate) -> datetime.datetime:
    """When a CA of ours was made (they are valid from BACKDATE before, for clocks that lag)."""
    return ca.not_valid_before_utc + BACKDATE
