"""vgate: a policy-as-code admission and compliance gateway for Volcano-scheduled clusters.

The public surface is small: ``create_app`` and ``Gateway`` for embedding and tests, the
``vgate`` command for everything else. They are imported lazily: `vgate serve` must set up
multiprocess metrics before anything imports prometheus_client (see ``server/metrics.py``).
"""

from typing import Any

__all__ = ["Gateway", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .server.flask_adapter import create_app

        return create_app
    if name == "Gateway":
        from .server.gateway import Gateway

        return Gateway
    raise AttributeError(name)
