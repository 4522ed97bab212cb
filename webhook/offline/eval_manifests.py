"""`vgate eval`: the whole admission path for manifests on disk, without a cluster.

Reads every document (multi-document YAML, `List` objects expanded). By default each object goes
through the modelled admission chain (``chain.model``: the API server's defaults and built-in
plugins, vgate's mutation, Volcano's webhooks with ``--with-volcano``, reinvocation), then vgate
validates what comes out; ``--as-submitted`` judges the objects as written. The report shows each
step that changed something, vgate's own patch as a diff of the YAML, and every violation and
warning, like `kyverno apply` or `gator test`. Namespace and PriorityClass objects among the
manifests describe the cluster (a namespace's labels and Volcano queue annotation, the classes
the Priority plugin resolves) and are not judged themselves.
Exit status: 0 all allowed, 1 any denied, 2 bad input.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from ..core.config import Config
from ..core.contract import PolicyEngine
from ..core.errors import ManifestError, ModelError, RequestError
from ..core.policy_exceptions import PolicyException
from ..files.yaml_problems import yaml_problem
from ..policy.regorus_engine import RegorusEngine
from .admit import OfflineResult, admit, admit_binding, is_binding
from .chain.job_controller import CONTROLLER_USER, is_volcano_job, pod_group_for
from .chain.model import Cluster, Delivery


@dataclass(frozen=True)
class Verdict:
    source: str
    manifest: dict[str, Any]
    result: OfflineResult

    @property
    def allowed(self) -> bool:
        return self.result.validation.decision.allowed

    @property
    def title(self) -> str:
        metadata = self.result.mutated.get("metadata") or {}
        return f"{self.manifest.get('kind')} {metadata.get('namespace', '')}/{metadata.get('name', '')}"

    def as_json(self) -> dict[str, Any]:
        decision = self.result.validation.decision
        delivery = self.result.delivery
        return {
            "source": self.source, "kind": self.manifest.get("kind"),
            "namespace": (self.result.mutated.get("metadata") or {}).get("namespace"),
            "name": (self.result.mutated.get("metadata") or {}).get("name"),
            "allowed": decision.allowed, "message": decision.message or None,  # a refusal before the rules too
            "patch": self.result.mutation.patch,
            "violations": [{"rule": o.rule, "message": o.message, "action": o.action, "exception": o.exception}
                           for o in self.result.validation.outcomes],
            "warnings": decision.warnings, "error": self.result.validation.error,
            "exempt": self.result.validation.exempt,
            **({"chain": [{"step": s.name, "source": s.source, "patch": s.patch} for s in delivery.steps],
                "refused": delivery.refused, "delivered": delivery.delivered} if delivery else {}),
            # The object validation judged: with the chain, what the model predicts the API server
            # sends vgate's /validate (tests/e2e/test_corpus_and_chain_model.py holds it to the real one).
            "object": self.result.mutated,
        }

    def as_text(self) -> str:
        decision = self.result.validation.decision
        lines = [f"{'ALLOWED' if decision.allowed else 'DENIED'}  {self.title}  ({self.source})"]
        delivery = self.result.delivery
        if delivery is None:
            diff = patch_diff(self.result.submitted, self.result.mutated)
            lines += [f"  {line}" for line in diff] if diff else ["  no patch"]
        else:
            lines += self._chain_lines(delivery)
        if self.result.validation.exempt:
            lines.append("  exempt   vgate leaves this namespace alone (exemptNamespaces or the vgate.io/exempt label)")
        if delivery is not None and delivery.refused:
            lines.append(f"  refused  {delivery.refused}")
        lines += [f"  {o.action:8s}[{o.rule}] {o.message}" + (f" (exception {o.exception})" if o.exception else "")
                  for o in self.result.validation.outcomes]
        if self.result.validation.error:
            lines.append(f"  error {self.result.validation.error}")
        return "\n".join(lines)

    def _chain_lines(self, delivery: Delivery) -> list[str]:
        """Each step that changed the object: vgate's as a YAML diff, the others as patch lines."""
        lines = []
        for step in delivery.steps:
            lines.append(f"  {step.name}  [{step.source}]")
            if step.name.startswith("webhook mutate.vgate.io"):
                after = jsonpatch.apply_patch(step.before, step.patch)
                lines += [f"    {line}" for line in patch_diff(step.before, after)]
            else:
                lines += [f"    {op['op']} {op['path']}" + (f": {_short(op['value'])}" if "value" in op else "")
                          for op in step.patch]
        if not any(s.name.startswith("webhook mutate.vgate.io") for s in delivery.steps):
            lines.append("  webhook mutate.vgate.io: no patch" if delivery.vgate_called
                         else "  webhook mutate.vgate.io: not called (its rules or namespaceSelector do not match)")
        return lines


def load_manifests(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every object in the files, with ``file#index`` as its source; raises ManifestError."""
    manifests = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8") if path != "-" else _stdin()
            documents = list(yaml.safe_load_all(text))
        except OSError as exc:
            raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            line, problem = yaml_problem(exc)
            raise ManifestError(f"{path}{f':{line}' if line else ''}: {problem}") from exc
        for index, document in enumerate(documents):
            if document is None:
                continue
            is_list = isinstance(document, dict) and document.get("kind") == "List"
            items = document.get("items") if is_list else [document]
            for item in items or []:
                if not isinstance(item, dict) or not item.get("kind") or not item.get("apiVersion"):
                    raise ManifestError(f"{path}#{index}: not a Kubernetes object (needs apiVersion and kind)")
                manifests.append((f"{path}#{index}", item))
    if not manifests:
        raise ManifestError("no objects found in " + ", ".join(paths))
    return manifests


def evaluate(manifests: list[tuple[str, dict[str, Any]]], config: Config, engine: PolicyEngine,
             exceptions: Sequence[PolicyException] = (), *, operation: str, namespace: str | None, user: str,
             cluster: Cluster | None = None) -> list[Verdict]:
    """Judge each manifest; Namespaces and PriorityClasses describe the cluster and are not judged.
    With the chain model, an admitted Volcano Job is followed by the PodGroup its controller creates."""
    context = Cluster.build(config) if cluster is None else cluster
    judged = [(source, manifest) for source, manifest in manifests if not context.learn(manifest)]
    if context.namespaces and isinstance(engine, RegorusEngine):
        engine.set_inventory(context.inventory())  # as the server's policies read its cluster state
    verdicts = []
    for source, manifest in judged:
        try:
            if is_binding(manifest):  # judged against the Nodes and Pods given (or read) before it
                result = admit_binding(manifest, config, engine, exceptions, context, namespace=namespace, user=user)
            else:
                result = admit(manifest, config, engine, exceptions, cluster=cluster, operation=operation,
                               namespace=namespace, user=user, view=context)
                if result.validation.decision.allowed and operation == "CREATE":
                    context.remember(result.mutated)  # a Pod a later Binding may name
        except RequestError as exc:
            raise ManifestError(f"{source}: {exc.message}") from exc
        except ModelError as exc:
            raise ManifestError(f"{source}: {exc}") from exc
        verdicts.append(Verdict(source, manifest, result))
        stored = result.validation.decision.allowed and not (result.delivery and result.delivery.refused)
        if cluster is not None and operation == "CREATE" and is_volcano_job(manifest) and stored:
            group = pod_group_for(result.mutated)  # what Volcano's controller then creates: judged too
            made = admit(group, config, engine, exceptions, cluster=cluster, operation="CREATE", namespace=namespace,
                         user=CONTROLLER_USER)
            verdicts.append(Verdict(f"{source} (the PodGroup Volcano's job controller creates)", group, made))
    return verdicts


def _short(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def patch_diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """A unified diff of the object as YAML, before and after mutation."""
    old = yaml.safe_dump(before, sort_keys=False).splitlines()
    new = yaml.safe_dump(after, sort_keys=False).splitlines()
    return list(difflib.unified_diff(old, new, "submitted", "mutated", lineterm="", n=2))


def _stdin() -> str:
    import sys

    return sys.stdin.read()
