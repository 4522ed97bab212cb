"""Admission chain: the tests that start vgate over HTTPS (the rest: tests/unit/offline/test_admission_chain.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

from offline.test_admission_chain import RESOURCE_GROUPS, vgate_mutator

from webhook.offline.admit import review_for
from webhook.offline.chain.model import Cluster, deliver

from corpus import corpus_volcano_jobs
from helpers import pod


def test_https_server_mutates_delivered_objects_and_is_reinvocation_safe(server, config):
    """The real server, over HTTPS, with objects the model delivers and a reinvocation after Volcano."""
    import base64

    cluster = Cluster.build(config, with_volcano=True, resource_groups=RESOURCE_GROUPS)

    def https_mutator(obj: dict[str, Any]) -> list[dict[str, Any]]:
        answer = server.post("/mutate", review_for(obj, namespace="ml-training", dry_run=False)).json()["response"]
        return json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []

    job = copy.deepcopy(dict(corpus_volcano_jobs())["job.yaml#0"])
    del job["spec"]["queue"]
    delivery = deliver(job, "ml-training", "CREATE", cluster, https_mutator)
    assert delivery.delivered["spec"]["queue"] == "default" and delivery.final["spec"]["queue"] == "training"
    delivery = deliver(pod("trainer", "ml-training"), "ml-training", "CREATE", cluster, https_mutator)
    assert delivery.final["spec"]["schedulerName"] == "default-scheduler"  # Volcano's resource group, kept
    assert https_mutator(delivery.final) == []
    offline = deliver(
        pod("trainer", "ml-training"), "ml-training", "CREATE", cluster, vgate_mutator(config, "ml-training")
    )
    assert offline.final == delivery.final
