"""The answer schema (diagym.llm_policies.prompts.schema): seed 003's shape by default, each field
an enum of its range when bounded, and a grammar from the bounded schema that admits only
in-range values (llama-cpp-python's own converter, which ignores minimum and maximum)."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

from diagym import envs  # noqa: F401
from diagym.llm_policies.harness.tools import tool_dict
from diagym.llm_policies.policy import answer_schema
from diagym.llm_policies.prompts.dacs import ANSWER_SCHEMA
from diagym.llm_policies.prompts.schema import integer_fields_schema
from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA

KWARGS = {"depth": 8, "width": 4, "candidates": 3, "snapshot_period": 1, "error_allowance": 2}


def test_the_default_schemas_bound_fields_from_below_only() -> None:
    assert ACTION_SCHEMA == {
        "type": "object",
        "properties": {"operation": {"type": "integer", "minimum": 0},
                       "candidate": {"type": "integer", "minimum": 0}},
        "required": ["operation", "candidate"], "additionalProperties": False}
    assert ANSWER_SCHEMA["properties"] == {"answer": {"type": "integer", "minimum": 0}}


def test_bounded_fields_are_the_envs_ranges_in_text_and_tools_alike() -> None:
    env = gym.make("StatefulWorkflow-v0", **KWARGS)
    assert answer_schema(env) == ACTION_SCHEMA
    bounded = answer_schema(env, bounded_fields=True)
    assert bounded["properties"] == {"operation": {"type": "integer", "enum": list(range(8))},
                                     "candidate": {"type": "integer", "enum": [0, 1, 2]}}
    assert bounded["required"] == ["operation", "candidate"]
    from diagym.llm_policies.families import text_family

    (execute,) = text_family(env).tools(env.unwrapped)
    assert tool_dict(execute, bounded=True)["function"]["parameters"] == bounded
    assert tool_dict(execute)["function"]["parameters"] == ACTION_SCHEMA


def test_a_bound_below_one_or_a_missing_bound_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        integer_fields_schema(("a", "b"), (3,))
    assert str(info.value) == "bounds must give each of ['a', 'b'] a bound >= 1; got [3]"
    with pytest.raises(ValueError):
        integer_fields_schema(("a",), (0,))


def test_llama_cpps_grammar_from_the_bounded_schema_names_only_the_slots() -> None:
    grammar_module = pytest.importorskip("llama_cpp.llama_grammar")
    env = gym.make("StatefulWorkflow-v0", **KWARGS)
    bounded = grammar_module.json_schema_to_gbnf(json.dumps(answer_schema(env, True)))
    plain = grammar_module.json_schema_to_gbnf(json.dumps(ACTION_SCHEMA))
    slots = re.search(r"^candidate ::= (.*)$", bounded, flags=re.M)
    assert slots is not None, bounded
    assert slots.group(1).split(" | ") == ['"0"', '"1"', '"2"']
    # without the enum the field is any integer, negative ones too: the 0.5B's 3 and 4 pass
    assert "candidate ::=" not in plain and 'integer ::= ("-"? integral-part)' in plain
