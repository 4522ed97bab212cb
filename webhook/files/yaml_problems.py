"""A YAML error as one line: where it is and what it is, the way every file vgate reads reports it.

PyYAML's own message spans several lines (the context, the problem, a caret under the text); a
user gets ``file:line: invalid YAML: <the problem>`` instead, from the config, an exception file or
a manifest alike.
"""

from __future__ import annotations

import yaml


def yaml_problem(exc: yaml.YAMLError) -> tuple[int | None, str]:
    """The 1-based line of the problem (None when PyYAML does not say) and the problem, one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return (mark.line + 1 if mark is not None else None), f"invalid YAML: {problem}"
