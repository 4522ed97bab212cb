"""Per-resource policy results of an hour, as Policy Reporter reads them.

Policy Reporter (and Kyverno's own reports) show, per namespace, each resource and each rule's
result for it. An hour's decision log may judge one resource many times (created, denied, fixed,
updated): the report keeps, per resource and rule, the latest result. A CREATE starts the resource
afresh (a denied object was never stored; the next one of that name is judged anew); an UPDATE
adds what it judged (an image changed by ``kubectl set image``) and changes nothing when the rules
do not re-judge it (a scheduler's annotation, the fields immutable on a running pod). Deny is
``fail``, warn and audit ``warn``, a rule waived by a policy exception ``skip``. A resource with
no result passed every rule and is not listed. Dry runs and exempt requests are no resource state;
a deletion ends one; /mutate's records carry no rule results. At most ``MAX_RESOURCES`` resources are kept
(the newest win; the report says how many were left out), so a busy hour stays bounded in memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

MAX_RESOURCES = 5_000
STATUS = {"deny": "fail", "warn": "warn", "audit": "warn"}


@dataclass
class ResourceResults:
    """Each resource's latest rule results in the hour, keyed by (namespace, kind, name)."""

    latest: OrderedDict[tuple[str, str, str], dict[str, Any]] = field(default_factory=OrderedDict)
    left_out: int = 0

    def add(self, record: dict[str, Any]) -> None:
        """Take one decision record (records arrive in time order)."""
        if record.get("endpoint") != "validate" or record.get("dryRun") or record.get("exempt") \
                or not record.get("name"):
            return  # only /validate judges; a dry run or an exempt request leaves no resource state
        key = (str(record.get("namespace") or ""), str(record.get("kind") or ""), str(record["name"]))
        operation = record.get("operation")
        if operation == "DELETE":
            self.latest.pop(key, None)
            return
        rules = {r["id"]: r for r in record.get("rules") or [] if isinstance(r, dict) and "id" in r}
        if operation == "CREATE" and record.get("decision") != "error":
            self.latest.pop(key, None)  # a new object of that name: what was said of an earlier one is void
        elif not rules:
            return  # an UPDATE the rules do not re-judge (a scheduler's annotation, a binding): nothing changes
        entry = self.latest.pop(key, {"time": None, "rules": {}})
        entry = {"time": record.get("time"), "rules": {**entry["rules"], **rules}}
        if entry["rules"]:
            self.latest[key] = entry
        if len(self.latest) > MAX_RESOURCES:
            self.latest.popitem(last=False)
            self.left_out += 1

    def by_namespace(self) -> dict[str, list[tuple[tuple[str, str, str], dict[str, Any]]]]:
        """The resources grouped by namespace ("" for cluster-scoped ones), in a stable order."""
        grouped: dict[str, list[tuple[tuple[str, str, str], dict[str, Any]]]] = {}
        for key in sorted(self.latest):
            grouped.setdefault(key[0], []).append((key, self.latest[key]))
        return grouped


def status_of(result: dict[str, Any]) -> str:
    return "skip" if result.get("exception") else STATUS.get(str(result.get("action")), "warn")


def resource_ref(key: tuple[str, str, str]) -> dict[str, str]:
    """The ObjectReference of a record's resource: kind is "<group/version>/<Kind>" there."""
    namespace, kind, name = key
    api_version, _, kind_name = kind.rpartition("/")
    reference = {"apiVersion": api_version or "v1", "kind": kind_name, "name": name}
    return {**reference, "namespace": namespace} if namespace else reference
