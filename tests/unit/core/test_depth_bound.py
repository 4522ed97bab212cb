"""decode_review skips the depth walk when the body's bytes bound its depth within the limit: the
bound must never be below the true depth, whatever the strings hold and however the JSON is spaced."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from webhook.core.admission import RequestError, decode_review, depth_bound

TRICKY = ["{", "}", "[", "]", "{}", "[]", "}{", "][", "{{}", "[[]", '"', "\\", "{\"a\":{}}", "x[]y{}z"]


def depth(value: Any) -> int:
    """Containers on the deepest path (the root container counts as one), as _check_depth counts."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def document(rng: random.Random, levels: int) -> Any:
    """A random value up to ``levels`` deep: empty and non-empty containers, strings of brackets."""
    roll = rng.random()
    if levels == 0 or roll < 0.25:
        return rng.choice([1, None, True, "".join(rng.choices(TRICKY, k=rng.randint(0, 4)))])
    if roll < 0.35:
        return rng.choice([{}, []])
    children = [document(rng, levels - 1) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        return children
    return {"".join(rng.choices(TRICKY, k=rng.randint(0, 3))) + str(i): child for i, child in enumerate(children)}


def spellings(value: Any) -> list[bytes]:
    """The same document compact, spaced and indented."""
    return [orjson.dumps(value), json.dumps(value).encode(), json.dumps(value, indent=1).encode(),
            json.dumps(value, separators=(" , ", " : ")).encode()]


def test_the_bound_is_never_below_the_true_depth() -> None:
    rng = random.Random(20261206)
    for _ in range(3000):
        value = document(rng, rng.randint(1, 12))
        for body in spellings(value):
            assert depth_bound(body) >= depth(value), body


def test_deep_bodies_are_refused_whether_or_not_the_walk_runs() -> None:
    """A review whose extra field nests exactly as deep as the limit passes; one level less of limit
    refuses it. Limits above the bound take the fast path, those below it walk."""
    rng = random.Random(7)
    for _ in range(300):
        extra = document(rng, rng.randint(1, 10))
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "extra": extra,
                  "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "operation": "DELETE"}}
        body = orjson.dumps(review)
        deepest = max(depth(review), 3)
        decode_review(body, deepest)
        with pytest.raises(RequestError, match=f"nested deeper than {deepest - 1}"):
            decode_review(body, deepest - 1)


def test_the_bound_is_the_brackets_that_open() -> None:
    assert depth_bound(b'{"a":{},"b":[],"c":"{}[]"}') == 5  # text counts too: a bound, not the depth
    assert depth_bound(b'{"a":{"b":{"c":[1]}}}') == 4
    assert depth_bound(b"1") == 0
