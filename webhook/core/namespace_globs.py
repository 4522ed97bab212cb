"""Whether namespace globs, together, match every namespace there can be.

Refusing the literal ``*`` is not enough: ``?*``, ``*?``, ``[a-z0-9]*`` or ``[!-]*`` match every
namespace name too, because names are RFC 1123 labels (``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, at most
63 characters); and ``[a-m]*``, ``[n-z]*``, ``[0-9]*`` do together what none does alone. So globs are
judged by what they can match, not by how they are spelled: each glob (shell syntax, as ``fnmatch``
reads it: ``*``, ``?``, ``[...]``, ``[!...]``) is run as a nondeterministic automaton beside the label
grammar's and beside each other, over every name length from 1 to 63, and they match every
namespace unless some valid name reaches an end none of them accepts.
"""

from __future__ import annotations

import string
from collections.abc import Callable

_ALPHABET = string.ascii_lowercase + string.digits + "-"
_MAX_LENGTH = 63
Token = tuple[str, Callable[[str], bool]]  # ("*", any) or ("1", one character that matches)

# The label grammar as a DFA: 0 start, 1 after a letter or digit (a valid end), 2 after "-".
_LABEL = {(0, True): 1, (1, True): 1, (1, False): 2, (2, True): 1, (2, False): 2}


def matches_every_namespace(*patterns: str) -> bool:
    """True if ``patterns`` together match every valid namespace name (so excepting them is cluster-wide)."""
    globs = [_tokens(pattern) for pattern in patterns]
    if not globs:
        return False
    frontier = {(0, tuple(_closure(tokens, {0}) for tokens in globs))}
    for _ in range(_MAX_LENGTH):
        following = set()
        for label, states in frontier:
            for char in _ALPHABET:
                after = _LABEL.get((label, char != "-"))
                if after is None:
                    continue
                moved = tuple(_closure(tokens, _step(tokens, each, char))
                              for tokens, each in zip(globs, states, strict=True))
                if after == 1 and not any(len(tokens) in each for tokens, each in zip(globs, moved, strict=True)):
                    return False  # a valid name no glob matches
                following.add((after, moved))
        frontier = following
    return True


def _step(tokens: list[Token], states: frozenset[int], char: str) -> set[int]:
    moved = set()
    for state in states:
        if state < len(tokens):
            kind, accepts = tokens[state]
            if kind == "*":
                moved.add(state)
            elif accepts(char):
                moved.add(state + 1)
    return moved


def _closure(tokens: list[Token], states: set[int]) -> frozenset[int]:
    """Add the states a ``*`` reaches by matching nothing."""
    closed = set(states)
    for state in sorted(states):
        while state < len(tokens) and tokens[state][0] == "*":
            state += 1
            closed.add(state)
    return frozenset(closed)


def _tokens(pattern: str) -> list[Token]:
    """fnmatch's syntax: ``*``, ``?``, a ``[...]`` class (``!`` negates, ``a-z`` ranges; an unclosed
    ``[`` is a literal), any other character itself."""
    tokens: list[Token] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            if not tokens or tokens[-1][0] != "*":
                tokens.append(("*", lambda c: True))
        elif char == "?":
            tokens.append(("1", lambda c: True))
        elif char == "[" and (end := _class_end(pattern, index)) != -1:
            tokens.append(("1", _class(pattern[index + 1:end])))
            index = end
        else:
            tokens.append(("1", _literal(char)))
        index += 1
    return tokens


def _literal(char: str) -> Callable[[str], bool]:
    return lambda c: c == char


def _class_end(pattern: str, start: int) -> int:
    """Where the class opened at ``start`` closes (a "]" first in it is a member), or -1."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "!":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    return pattern.find("]", index)


def _class(body: str) -> Callable[[str], bool]:
    negated = body.startswith("!")
    body = body[1:] if negated else body
    members: list[tuple[str, str]] = []
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            members.append((body[index], body[index + 2]))
            index += 3
        else:
            members.append((body[index], body[index]))
            index += 1
    return lambda c: any(low <= c <= high for low, high in members) != negated
