"""The gateway configuration file: one schema, one loader, defaults only in the schema.

The YAML file is validated against ``config.schema.json``; while validating, the loader fills in
every ``default`` the schema declares, so the rest of the code reads a complete document (a
``core.config.Config``) and never carries fallbacks of its own. Errors name the file and the line
of the offending key.
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import ipaddress
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import validators

from ..core.config import Config
from ..core.errors import ConfigError
from ..core.quantity import parse_quantity
from .yaml_problems import yaml_problem

DEFAULT_CONFIG_PATH = Path(str(resources.files("webhook.files") / "defaults" / "vgate.yaml"))


@functools.cache
def _validator() -> Any:
    """The schema's validator, filling in defaults; built on first use, not at import."""
    schema = json.loads((resources.files("webhook.files") / "config.schema.json").read_text())
    return _with_defaults(jsonschema.Draft202012Validator)(schema)


def _with_defaults(validator_class: Any) -> Any:
    """A validator that also writes each property's ``default`` into the instance (jsonschema FAQ)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": fill_then_check})  # type: ignore[no-untyped-call]


def load_config(path: str | Path | None = None) -> Config:
    """Read, validate and complete a config file (the shipped example when ``path`` is None)."""
    source = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(source), None, f"cannot read config: {exc.strerror or exc}") from exc
    return parse_config(text, str(source))


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate YAML text as a gateway config; raise ConfigError naming the line at fault."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, *yaml_problem(exc)) from exc
    if document is None:  # an empty file, or one of comments: a truncated write or a wrong mount, not "defaults"
        raise ConfigError(source, 1, "the config is empty; write {} to mean every default")
    if not isinstance(document, dict):
        raise ConfigError(source, 1, "the config must be a mapping at the top level")
    error = jsonschema.exceptions.best_match(_validator().iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            path += sorted(set(error.instance) - set(error.schema.get("properties", {})))[:1]
        line = _line_of(text, path)
        raise ConfigError(source, line, f"{where}: {error.message}")
    _check_cross_references(document, text, source)
    return Config(source, document)


def _check_cross_references(document: dict[str, Any], text: str, source: str) -> None:
    """What a schema cannot say: names that must refer to other entries, and quantity order."""
    queues = document["queues"]
    definitions = queues["definitions"]
    priorities = document["priorityClasses"]["values"]
    references: list[tuple[list[Any], str]] = [(["queues", "default"], queues["default"])]
    references += [(["queues", "byNamespace", ns], q) for ns, q in queues["byNamespace"].items()]
    references += [(["queues", "bySelector", i, "queue"], rule["queue"]) for i, rule in enumerate(queues["bySelector"])]
    for path, queue in references:
        if queue not in definitions:
            raise ConfigError(source, _line_of(text, path),
                              f"{'/'.join(map(str, path))}: queue {queue!r} is not in queues/definitions")
    for namespace, queue in queues["byNamespace"].items():
        if not any(fnmatch.fnmatchcase(namespace, glob) for glob in definitions[queue].get("namespaces", ["*"])):
            path = ["queues", "byNamespace", namespace]
            raise ConfigError(source, _line_of(text, path), f"{'/'.join(path)}: namespace {namespace!r} may not use "
                              f"queue {queue!r} (queues/definitions/{queue}/namespaces): vgate would inject a queue "
                              "it then denies")
    for name, spec in definitions.items():
        klass = spec.get("priorityClass")
        if klass is not None and klass not in priorities:
            path = ["queues", "definitions", name, "priorityClass"]
            raise ConfigError(source, _line_of(text, path),
                              f"{'/'.join(path)}: priority class {klass!r} has no value in priorityClasses/values")
    for key in ("internalCIDRs", "podCIDRs"):
        for index, cidr in enumerate(document["placement"]["egress"][key]):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                path = ["placement", "egress", key, index]
                raise ConfigError(source, _line_of(text, path), f"placement/egress/{key}/{index}: {exc}") from exc
    burstable = document["qos"]["memory"]["burstable"]
    if parse_quantity(burstable["limit"]) < parse_quantity(burstable["request"]):
        path = ["qos", "memory", "burstable", "limit"]
        raise ConfigError(source, _line_of(text, path),
                          f"{'/'.join(path)}: limit {burstable['limit']} is below request {burstable['request']}")


def _line_of(text: str, path: list[Any]) -> int | None:
    """The 1-based line of the YAML node at ``path``, or of its deepest existing ancestor."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == str(key)), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line
