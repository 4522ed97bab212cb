"""Processes that end with the one that started them: the evaluator child with its worker, each
server worker with the master.

``PR_SET_PDEATHSIG`` asks the kernel to send SIGKILL when the parent ends, however it ends (a
supervisor's SIGKILL, an OOM kill): no handler of the parent's has to run. Without it, a master
killed that way left its workers serving on the inherited socket, unsupervised and without the
probe port, until someone found them. The signal comes when the parent's *thread* that started
the process ends: it suits processes started by a thread that lives as long as its own process
(granian's main loop starts every worker).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Ask for SIGKILL when the parent ends; if ``parent`` (its pid) has ended already, end now: the
    request covers only a parent alive when it is made."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: no such request
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
