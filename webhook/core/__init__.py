"""The pure core: an admission request and the gateway's state in, a decision out.

Review codec, workloads, queues, QoS, quantities, mutation, enforcement, validation and the
decision contract an engine must meet. No I/O on the request path, no metrics, no clock reads:
the server around it (``webhook.server``) and the offline commands (``webhook.offline``) supply
those. It imports nothing else of vgate's.
"""
