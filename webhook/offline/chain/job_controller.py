"""The PodGroup Volcano's job controller creates for a Job (``createOrUpdatePodGroup`` in
volcano-sh/volcano pkg/controllers/job/job_controller_actions.go, v1.14), so `vgate eval` judges it
too: a Job can be admitted while the PodGroup made from it is refused (its queue, once Volcano's
PodGroup webhook replaces ``default`` with the namespace's annotation, unknown to vgate), and the
Job then never runs. Modelled: name, namespace, the Job's labels and annotations, the controller
reference, minMember, minTaskMember, queue and priorityClassName; not minResources (no rule reads it)
nor networkTopology and subGroupPolicy.
"""

from __future__ import annotations

from typing import Any

CONTROLLER_USER = "system:serviceaccount:volcano-system:volcano-controllers"
OFFLINE_UID = "00000000-0000-0000-0000-000000000000"  # a Job has its uid only once stored


def pod_group_for(job: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup the controller creates for ``job`` (as the API server stored it)."""
    metadata, spec = job.get("metadata") or {}, job.get("spec") or {}
    uid = metadata.get("uid") or OFFLINE_UID
    group: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": f"{metadata.get('name')}-{uid}", "namespace": metadata.get("namespace"),
                     "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                          "name": metadata.get("name"), "uid": uid, "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"minMember": spec.get("minAvailable", 0),
                 "minTaskMember": {task.get("name"): task.get("minAvailable", task.get("replicas", 0))
                                   for task in spec.get("tasks") or [] if isinstance(task, dict)},
                 "queue": spec.get("queue", "")},
    }
    for field in ("labels", "annotations"):
        if metadata.get(field):
            group["metadata"][field] = dict(metadata[field])
    if spec.get("priorityClassName"):
        group["spec"]["priorityClassName"] = spec["priorityClassName"]
    return group


def is_volcano_job(manifest: dict[str, Any]) -> bool:
    return manifest.get("kind") == "Job" and str(manifest.get("apiVersion", "")).startswith("batch.volcano.sh/")
