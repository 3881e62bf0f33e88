"""policy_label: a policy in the few words a person reads, for every kind a log holds."""

from __future__ import annotations

import pytest

from diagym.analysis.policy_label import policy_label


@pytest.mark.parametrize("described, label", [
    ({"controller": "cache-2"}, "cache-2"),
    ({"dacs_controller": "flat-reader"}, "flat-reader"),
    ({"import": "tests.user_policy:Greedy", "policy": "Greedy"}, "tests.user_policy:Greedy"),
    ({"model": "qwen", "harness": "tools"}, "qwen (tools)"),
    ({"policy": "flat-reader", "guess": True}, "flat-reader (guess)"),  # was raw JSON
    ({"policy": "flat-reader", "guess": False}, "flat-reader"),
    ({"unknown": 1}, '{"unknown": 1}'),
    ("cache-2", "cache-2"),
])
def test_each_kind_of_policy_reads_as_its_name(described: object, label: str) -> None:
    assert policy_label(described) == label
