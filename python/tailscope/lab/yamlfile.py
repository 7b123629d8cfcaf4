"""YAML as users write it: PyYAML follows YAML 1.1, where `1e9` (no dot, no sign in the exponent)
is a string; YAML 1.2, JSON and every user read it as a number. This loader reads numbers the
1.2 way, so `cpu: 1e9` is a number a validator can range-check, not a string it calls the
wrong type. It also refuses a key given twice in one mapping: YAML says keys are unique, PyYAML
keeps the last silently, and a topology line with `op: find, ..., op: get` would run what its
author did not read."""

from __future__ import annotations

import re
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    pass


# YAML 1.2 core schema floats, beside PyYAML's own (which require a dot): 1e9, -2E-3, .5e3, 10.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def _unique_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found the key {key!r} twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def safe_load(text: str) -> Any:
    """yaml.safe_load with YAML 1.2's numbers."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
