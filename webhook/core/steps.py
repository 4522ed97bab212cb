"""Request code that waits, written once for both ways of waiting.

A decision waits twice: for the policy engine's answer and for its record's sync. The gateway's
request path is written as generators that *yield* what they wait for (an ``EngineInput`` to
evaluate, a ``Record`` to write) and are sent the answer, or have the failure thrown in at the
``yield``. So the same code runs on a thread that blocks (``run``: Flask under gunicorn, the
offline commands, the background scan) and on an event loop that must not (``run_async``: the
ASGI path, where neither wait hands the request to another thread; docs/operators.md,
"Performance").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .contract import EngineInput, Evaluation

T = TypeVar("T")


@dataclass(frozen=True)
class Record:
    """One decision record to make durable (its answer waits for it)."""

    entry: dict[str, Any]


Effect = EngineInput | Record
Steps = Generator[Effect, Any, T]  # yields what it waits for, is sent the answer (None for a Record), returns T


def run(steps: Steps[T], evaluate: Callable[[EngineInput], Evaluation],
        record: Callable[[dict[str, Any]], object]) -> T:
    """``steps`` to their end on this thread, each wait a blocking call."""
    effect = _resume(steps, None, None)
    while not isinstance(effect, _Done):
        try:
            answer, failure = (evaluate(effect) if isinstance(effect, EngineInput) else record(effect.entry)), None
        except Exception as error:  # noqa: BLE001 - thrown into the steps, which decide what it means
            answer, failure = None, error
        effect = _resume(steps, answer, failure)
    return effect.value


async def run_async(steps: Steps[T], evaluate: Callable[[EngineInput], Awaitable[Evaluation]],
                    record: Callable[[dict[str, Any]], Awaitable[object]]) -> T:
    """``steps`` to their end on the running event loop, each wait awaited."""
    effect = _resume(steps, None, None)
    while not isinstance(effect, _Done):
        try:
            waited = evaluate(effect) if isinstance(effect, EngineInput) else record(effect.entry)
            answer, failure = await waited, None
        except Exception as error:  # noqa: BLE001 - thrown into the steps, which decide what it means
            answer, failure = None, error
        effect = _resume(steps, answer, failure)
    return effect.value


@dataclass(frozen=True)
class _Done(Generic[T]):
    value: T


def _resume(steps: Steps[T], answer: Any, failure: Exception | None) -> Effect | _Done[T]:
    """The next thing ``steps`` waits for, once sent ``answer`` (or thrown ``failure``); _Done at its end."""
    try:
        return steps.throw(failure) if failure is not None else steps.send(answer)
    except StopIteration as end:
        return _Done(end.value)
