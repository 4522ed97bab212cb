"""Polling for what happens eventually: a controller acting, a reload landing, a port opening."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 40.0, interval: float = 0.25) -> T:
    """``check()``'s first truthy value within ``timeout`` seconds (polled), or its last falsy one."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
