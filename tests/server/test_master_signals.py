"""SIGTERM and SIGINT stop `vgate serve` whichever of the master's threads the kernel hands them to.

A process-directed signal goes to any thread that does not block it. Python runs the handler in the
main thread once it runs Python code again; granian's master waited on a lock with no timeout, so a
signal taken by another thread (the probe port's, a watcher's) was never acted on: the master kept
serving (seen as a hung test, 1 of 25 SIGINTs while /readyz was polled). Here each signal is sent
to one named non-main thread (tgkill), which makes that case certain.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers import descendants, free_port

SYS_TGKILL = 234  # x86-64


def tgkill(pid: int, tid: int, signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def other_threads(pid: int) -> list[int]:
    return sorted(int(task.name) for task in Path(f"/proc/{pid}/task").iterdir() if int(task.name) != pid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_taken_by_another_thread_of_the_master_stops_it(start_server, signum):
    server = start_server(workers=1, extra_args=("--metrics-bind", f"127.0.0.1:{free_port()}"))
    threads = other_threads(server.process.pid)
    assert len(threads) >= 2, "the probe port's and the certificate watcher's threads, at least"
    tgkill(server.process.pid, threads[-1], signum)
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{signal.Signals(signum).name} to thread {threads[-1]} of the master was not acted on")
    assert "shutdown completed" in server.output(), server.output()[-2000:]  # granian stopped as it should


def running(pid: int) -> bool:
    """Whether any thread of ``pid`` is alive and not a zombie. A killed process's first thread turns
    zombie while its others still exit, and its descriptors (the listening socket) close with the last."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    states = []
    for task in tasks:
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue
    return any(state != "Z" for state in states)


def test_a_master_killed_outright_takes_its_workers_and_their_evaluators_with_it(start_server):
    """SIGKILL (a supervisor's last word, the OOM killer) runs no handler of the master's: each worker
    asked the kernel to end it with the master, and each evaluator child with its worker, so nothing
    goes on serving the port unsupervised and without the probe port."""
    import socket
    import time

    server = start_server(workers=2)
    below = descendants(server.process.pid)
    assert len(below) >= 4, below  # two workers, an evaluator child each
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in below if running(pid)]
    for pid in left:  # not for later tests to meet
        os.kill(pid, signal.SIGKILL)
    assert not left, "left running after the master was killed"
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", server.port), timeout=3):
        pass
