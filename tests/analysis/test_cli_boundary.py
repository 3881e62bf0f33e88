"""The CLI's one error boundary (analysis/cli/main.py `reported`) and its one policy builder
(analysis/cli/policies.py `build_policy`): a known error is one line with its status, a bug
keeps its traceback, and every --policy form becomes a diagym.controllers.policy.PolicyFactory."""

from __future__ import annotations

import argparse

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
from diagym.analysis.cli.errors import COST_LIMIT_STATUS, USAGE_STATUS, UsageError
from diagym.analysis.cli.main import build_parser, command_name, main, reported
from diagym.analysis.cli.policies import build_policy
from diagym.controllers.policy import Policy, PolicyFactory
from diagym.llm_policies.client.prices import CostLimitReached

ENV = "StatefulWorkflow-v0"


def test_a_usage_error_is_one_line_made_safe_for_a_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert reported("run", UsageError("bad \x1b[31mvalue\nnext")) == USAGE_STATUS
    assert capsys.readouterr().err == "diagym run: error: bad \\x1b[31mvalue\\nnext\n"


def test_a_cost_limit_has_its_own_line_and_status(capsys: pytest.CaptureFixture[str]) -> None:
    reached = CostLimitReached(0.5, 1.0, 0.75)
    assert reported("llm-study", reached) == COST_LIMIT_STATUS
    assert capsys.readouterr().err == f"diagym llm-study: {reached}\n"


@pytest.mark.parametrize("bug", [KeyError("k"), AttributeError("a"), ZeroDivisionError()])
def test_a_bug_is_not_reported_as_a_usage_error(bug: Exception,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert reported("run", bug) is None
    assert capsys.readouterr().err == ""


def test_a_bug_in_a_command_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from diagym.analysis.cli import summarize

    def broken(_args: argparse.Namespace) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(summarize, "run", broken)
    with pytest.raises(KeyError, match="a bug"):
        main(["summarize", "missing.jsonl"])


def test_a_sub_command_is_named_in_full() -> None:
    parser = build_parser()
    assert command_name(parser.parse_args(["rcwt", "fit", __file__, "--window", "9"])) == (
        "rcwt fit")
    assert command_name(parser.parse_args(["audit", "--n-ops", "4"])) == "audit"


def _run_args(policy: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", "--env", ENV, "--policy", policy, "--episodes", "2"])


@pytest.mark.parametrize(("policy", "text_actions", "chat"), [
    ("cache-2", False, False),
    ("text-oracle", True, True),
    ("tests.user_policy:FirstReady", False, False),
    ("tests.user_policy:JsonFirstReady", True, False),
])
def test_every_policy_form_is_a_factory_that_plays(policy: str, text_actions: bool,
                                                   chat: bool) -> None:
    from diagym.analysis.llm_runs import make_text_env
    from diagym.controllers.rollout import rollout

    with build_policy(_run_args(policy), ENV) as built:
        assert isinstance(built.factory, PolicyFactory)
        assert (built.text_actions, built.chat) == (text_actions, chat)
        env = make_text_env(ENV) if text_actions else gym.make(ENV)
        made = built.factory(env)
        assert isinstance(made, Policy)
        assert len(rollout(env, made, 2, seed=0)) == 2
        assert isinstance(built.factory.for_harness("json"), PolicyFactory)


def test_the_oracle_in_another_harness_plays_that_harness() -> None:
    with build_policy(_run_args("text-oracle"), ENV) as built:
        assert built.factory.harness == "json"
        assert built.factory.for_harness("tools").harness == "tools"
        assert built.factory.for_harness("tools").budget == built.factory.budget
