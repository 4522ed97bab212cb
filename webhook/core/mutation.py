"""/mutate: inject the Volcano queue, scheduler, priority class and QoS resources.

Which kinds are patched, and how, is their registry entry's (``kinds.KINDS``: a handler with a
``mutator``, ``mutators``); how a change becomes a JSON Patch, and how a reinvocation never undoes
another webhook, is ``patching``. This module decides whether a request is mutated at all.

Only CREATE is mutated. On UPDATE a pod's resources, priority, schedulerName and nodeSelector
are immutable and a Volcano Job's spec is frozen but for scaling; the queue and QoS decisions
were recorded at CREATE and rewriting them on a running workload would misstate them.
"""

from __future__ import annotations

from .admission import AdmissionRequest
from .config import Config
from .kind_handler import NO_CONTEXT, KindContext
from .kinds import entry_of
from .patching import Mutation, patch_for
from .size_limits import oversize
from .workloads import is_exempt


def mutate(request: AdmissionRequest, config: Config, context: KindContext = NO_CONTEXT) -> Mutation:
    """The mutation for one admission request; an empty Mutation when nothing applies.

    ``context`` (the entry's ``KindHandler.context``): the namespace's queue annotation and the
    labels a Spark executor inherits from its driver (its sensitivity, its egress label, which the
    deny-egress NetworkPolicy selects), added to the pod.
    """
    entry = entry_of(request)
    if (entry is None or entry.handler.mutator is None or request.operation != "CREATE" or request.object is None
            or is_exempt(request.namespace, config) or oversize(entry.handler, request.object, config)):
        return Mutation()  # an oversized object is left to /validate, which denies it with the reason
    return patch_for(entry.handler.mutator, request.object, request.namespace, config, context.namespace_queue,
                     context.inherited)
