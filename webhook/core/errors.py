"""Every error vgate raises on purpose, in one place.

    VgateError
    ├── SourceError          a file an operator wrote is wrong: carries file, line, reason
    │   ├── ConfigError      the gateway config (YAML / JSON Schema)
    │   └── PolicyError      a Rego file that does not parse or compile
    ├── RequestError         an HTTP request we refuse: carries the status (400, 413)
    └── EvaluationError      policy evaluation failed at request time (answered per failureMode)

Start-up turns a SourceError into a one-line message and a non-zero exit; the HTTP layer
turns a RequestError into a one-line JSON error. Nothing else should reach a user.
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


class RequestError(VgateError):
    """A request the webhook refuses before any admission decision: 400 or 413."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class EvaluationError(VgateError):
    """Policy evaluation failed for one request (engine error, bad policy output)."""
