"""Words a person reads on the pages: a policy in a few words (policy_label), and a call no
model answered said so rather than timed."""

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


@pytest.mark.parametrize("cache, said", [
    ("log", "replayed from the run log after a resume (no call made)"),
    ("hit", "answered from the response cache (no call made)"),
    ("miss", "latency 0.000 s"),
])
def test_a_call_no_model_answered_is_not_shown_with_a_latency(cache: str, said: str) -> None:
    """The report showed a decision replayed from the log after a resume with latency 0 s,
    as if the model had answered at once."""
    from diagym.analysis.report.episodes import _call_meta

    meta = _call_meta({"harness": "json", "latency_s": 0.0, "cache": cache})
    assert meta.split(", ")[1] == said
