"""The remote engine: each evaluation goes to an OPA server's Data API (opa-python-client).

The OPA server loads the same policy files (``opa run --server policies/``); vgate pushes the
gateway config to ``data.vgate.config`` and asks for ``data.vgate.main.result`` with the
AdmissionReview as input. The client's timeout is kept below the webhook's and it does not
retry, so a down or slow OPA costs at most one timeout and is then answered per the failure mode.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import requests
from opa_client import OpaClient

from ..core.contract import ENTRY_RULE, EngineInput, Evaluation, Inventory, parse_result
from ..core.errors import ConfigError, EvaluationError
from .sources import PolicySet


class OpaEngine:
    """Evaluates on a remote OPA; ``revision`` is that of the local copy of the policy files."""

    def __init__(self, url: str, policy_set: PolicySet, config_document: dict[str, Any], timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(url, None, "--opa-url must be http(s)://host[:port]")
        self.url = url
        self.revision = policy_set.revision
        self.name = "opa"
        self._client = OpaClient(host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 8181),
                                 ssl=parts.scheme == "https", timeout=timeout, retries=0)
        self._config = config_document
        self._data_pushed = False
        self._lock = threading.Lock()
        # the cluster state, put at data.inventory when it changes (as kube-mgmt replicates objects)
        self.inventory: Inventory | None = None
        self._pushed_version = -1

    def evaluate(self, request: EngineInput) -> Evaluation:
        try:
            self._push_config()
            self._push_inventory()
            answer = self._client.query_rule(request.document, "vgate/main", "result")
        except requests.Timeout:
            raise EvaluationError(f"OPA at {self.url} did not answer within {self._client.timeout}s") from None
        except requests.JSONDecodeError as exc:
            raise EvaluationError(f"OPA at {self.url} sent a malformed answer: {_one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - connection refused, HTTP errors, opa_client's own errors
            raise EvaluationError(f"OPA at {self.url} failed: {type(exc).__name__}: {_one_line(exc)}") from None
        if not isinstance(answer, dict) or "result" not in answer:
            raise EvaluationError(f"OPA at {self.url} has no {ENTRY_RULE}: load policies/ into it")
        return Evaluation(parse_result(answer["result"]), self.name)

    def _push_config(self) -> None:
        """Put the gateway config at data.vgate.config once (again after OPA was unreachable)."""
        if self._data_pushed:
            return
        with self._lock:
            if not self._data_pushed:
                self._client.update_or_create_data(self._config, "vgate/config")
                self._data_pushed = True


    def _push_inventory(self) -> None:
        if self.inventory is None:
            return
        version, inventory = self.inventory()
        if version != self._pushed_version:
            with self._lock:
                self._client.update_or_create_data(inventory, "inventory")
                self._pushed_version = version


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
