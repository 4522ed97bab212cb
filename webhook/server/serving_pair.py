"""The certificate and key the server presents: taken only as a matching pair, renewed without a restart.

The source files (a Secret volume, or what `vgate certs` wrote) may change at any time, and a
person replacing them by hand writes one before the other. The master copies them into a private
directory only when the key is the certificate's own; workers load the copy. A half-replaced pair
is logged and ignored (the old pair keeps serving); a new matching pair is copied and the workers
are replaced one by one, each drained first (``draining``), so renewals need no restart and drop no
request. A certificate that expires within ``WARN_DAYS`` is logged at start and at each new pair.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from pathlib import Path

from ..core.errors import CertificateError
from .certs import CertPaths, expires_at, is_matching_pair, write_atomically

log = logging.getLogger("vgate")
WARN_DAYS = 30


class ServingPair:
    """The verified copy of a certificate and key, in ``runtime_dir``, refreshed from ``source``."""

    def __init__(self, source: CertPaths, runtime_dir: Path) -> None:
        self.source = source
        self.served = CertPaths.under(runtime_dir)
        runtime_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._digest = ""
        self._refused = ""
        if not self.refresh():
            raise CertificateError(str(source.cert), None, f"it and {source.key} are not a certificate and its key "
                                   "(run vgate certs, or mount the Secret's tls.crt and tls.key)")

    def refresh(self) -> bool:
        """Copy the source pair if it changed and matches; True when a new pair is in place."""
        try:
            cert, key = self.source.cert.read_bytes(), self.source.key.read_bytes()
        except OSError as error:
            log.warning("cannot read the serving certificate (%s); the previous pair keeps serving", error)
            return False
        digest = hashlib.sha256(cert + b"\0" + key).hexdigest()
        if digest == self._digest:
            return False
        if not is_matching_pair(cert, key):
            if digest != self._refused:
                log.warning("%s and %s do not match (half replaced?): the previous pair keeps serving",
                            self.source.cert, self.source.key)
                self._refused = digest
            return False
        write_atomically(self.served.key, key, 0o600)
        write_atomically(self.served.cert, cert, 0o644)
        self._digest = digest
        self._warn_if_expiring(cert)
        return True

    @staticmethod
    def _warn_if_expiring(cert: bytes) -> None:
        left = expires_at(cert) - datetime.datetime.now(datetime.timezone.utc)
        if left < datetime.timedelta(days=WARN_DAYS):
            log.warning("the serving certificate expires in %d days: renew it (vgate certs, or cert-manager)",
                        left.days)

