"""The JSON schema of an answer made of integer fields, the one place it is built.

Every text answer (a StatefulWorkflow action, a DACS option) and every tool's arguments are
an object of required integer fields and nothing else. Seed 003's schema bounds them from
below only, so an integer past a field's range is the env's to refuse (invalid_action, as the
paper counts it). With the ranges given, each field is an `enum` of its values instead: a
constrained decoder then cannot write one out of range. Enum, not minimum/maximum, because
llama-cpp-python's schema-to-grammar conversion ignores minimum and maximum (a TODO in
llama_cpp/llama_grammar.py) and turns an enum into alternatives of the grammar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def integer_fields_schema(names: Sequence[str],
                          bounds: Sequence[int] | None = None) -> dict[str, Any]:
    """An object of the required integer fields `names`, each >= 0; with `bounds` (each
    field's exclusive upper bound, in order) each field is one of 0..bound-1 (module
    docstring)."""
    if bounds is None:
        properties = {name: {"type": "integer", "minimum": 0} for name in names}
    else:
        if len(bounds) != len(names) or any(int(b) < 1 for b in bounds):
            raise ValueError(f"bounds must give each of {list(names)} a bound >= 1; "
                             f"got {list(bounds)}")
        properties = {name: {"type": "integer", "enum": list(range(int(bound)))}
                      for name, bound in zip(names, bounds, strict=True)}
    return {"type": "object", "properties": properties, "required": list(names),
            "additionalProperties": False}


def fields_schema(fields: Sequence[tuple[str, int]], bounded: bool = False) -> dict[str, Any]:
    """integer_fields_schema of (name, exclusive bound) pairs, with the ranges when
    `bounded`."""
    return integer_fields_schema([name for name, _ in fields],
                                 [bound for _, bound in fields] if bounded else None)
