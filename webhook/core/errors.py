"""Every error vgate raises on purpose, in one place.

    VgateError
    ├── SourceError          a file an operator wrote is wrong: carries file, line, reason
    │   ├── ConfigError      the gateway config (YAML / JSON Schema)
    │   ├── PolicyError      a Rego file that does not parse or compile
    │   ├── KeyFileError     a report key (or its .pub) that is no readable Ed25519 PEM key
    │   └── CertificateError a serving certificate and key, or the kept CA, unreadable or mismatched
    ├── StartError           `vgate serve` cannot start (a port it cannot listen on)
    ├── CertificateManagerError the API server refused or did not answer the keeper of vgate's own certificate
    ├── WatchExpired         a watch's resourceVersion is gone (410): the informer lists again
    ├── RequestError         an HTTP request we refuse: carries the status (400, 413)
    ├── AuditError           a decision could not be made durable (answered per audit.failureMode)
    ├── EvaluationError      policy evaluation failed at request time (answered per failureMode)
    │   ├── EvaluatorTimeout the evaluator child missed its deadline (it is stopped)
    │   └── EvaluatorGone    the evaluator child died or closed its pipe
    ├── InputError           what `vgate eval` was given cannot be judged
    │   ├── ManifestError    a manifest: unreadable, not YAML, not a Kubernetes object
    │   └── ModelError       a manifest or CRD the admission-chain model cannot default
    ├── AdmissionRefused     the model's built-in API-server plugin refused (403 before any webhook)
    ├── SparkSpecError       a SparkApplication whose pods cannot be told (a size Spark would not read)
    ├── NotRegular           (also an OSError) a file planted where evidence lives: a link, FIFO, directory
    ├── UnverifiedReport     an hourly report the daily report will not sum (signature, checksum, anchor)
    ├── CollectorError       (also an OSError) the audit system's collector refused, spoke no protocol, or left
    └── Refused              a command that writes evidence refuses, and writes nothing
        ├── NotReportable    an hour that may not be reported (now, or in place)
        │   └── LockLost     the writers' lock name no longer leads to the file this writer locked
        └── NothingToSeal    a segment without a torn last line

Start-up turns a SourceError into a one-line message and a non-zero exit; the HTTP layer
turns a RequestError into a one-line JSON error; the CLI prints an InputError or a Refused
as one line and exits 2 or 1. Nothing else should reach a user.
"""

from __future__ import annotations


class VgateError(Exception):
    """Base of every error vgate raises deliberately."""


class SourceError(VgateError):
    """A file written by an operator or policy author is invalid."""

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        self.file = file
        self.line = line
        self.reason = reason
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {reason}")


class ConfigError(SourceError):
    """The gateway configuration is not valid YAML or does not match the schema."""


class PolicyError(SourceError):
    """A Rego file does not parse or compile."""


class KeyFileError(SourceError):
    """A report key (private, or its ``.pub``) cannot be read or is no Ed25519 key in PEM."""


class CertificateError(SourceError):
    """A serving certificate and its key (or the kept CA) cannot be read, or do not belong together."""


class StartError(VgateError):
    """`vgate serve` cannot start for a reason other than a file: a port it cannot listen on."""


class CertificateManagerError(VgateError):
    """The serving certificate's Secret or a webhook configuration could not be read or written.

    ``transient``: the API server did not answer or was busy (worth waiting for), not a refusal.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class WatchExpired(VgateError):
    """The API server compacted the history past a watch's resourceVersion: list again."""


class RequestError(VgateError):
    """A request the webhook refuses before any admission decision: 400 or 413."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class EvaluationError(VgateError):
    """Policy evaluation failed for one request (engine error, bad policy output)."""


class SparkSpecError(VgateError):
    """A SparkApplication whose pods cannot be told from its spec (a size Spark would not parse)."""


class AuditError(VgateError):
    """A decision could not be made durable."""


class EvaluatorTimeout(EvaluationError):
    """The evaluator child did not answer within its deadline."""


class EvaluatorGone(EvaluationError):
    """The evaluator child exited or closed its pipe mid-request."""


class InputError(VgateError):
    """Something given to `vgate eval` cannot be judged; the message names the file and why."""


class ManifestError(InputError):
    """A manifest that cannot be judged: unreadable, not YAML, not a Kubernetes object."""


class ModelError(InputError):
    """A manifest or CRD file the model cannot default: the message names the file and the reason."""


class AdmissionRefused(VgateError):
    """A built-in plugin of the modelled API server refused the request (403 before any webhook)."""


class Refused(VgateError):
    """A command that writes evidence refused; nothing was written."""


class NotReportable(Refused):
    """An hour that may not be reported (now, or in place); ``usage`` marks a bad request."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


class LockLost(NotReportable):
    """The lock's name no longer leads to the file this writer locked: another writer may be at work."""


class NotRegular(VgateError, OSError):
    """A path on a volume someone else may write that is not a regular file vgate may read (the
    message says what it is instead: a symbolic link, a FIFO, a directory, an endless file)."""

    def __str__(self) -> str:
        return str(self.strerror)


class CollectorError(VgateError, OSError):
    """The audit system's collector refused, answered something that is not the protocol, or went
    away (``forward.transport``); the forwarder retries from its saved cursor."""


class UnverifiedReport(VgateError):
    """An hourly report the daily report will not sum (the text says why)."""


class NothingToSeal(Refused):
    """The segment has no torn last line."""
