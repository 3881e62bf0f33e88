"""The whole-run estimate printed before a local model's run (analysis/cli/estimate.py): the
run's episodes times their decisions times the seconds a decision takes at the measured
speed, in run, diagnose and llm-study alike."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import pytest

from diagym.analysis.cli import main
from tests.llm_fake_server import FakeServer, Reply, scripted

# The stubbed speed: a cold decision of 1,000 prompt tokens and 24 answer tokens
# (flags_chat.ESTIMATE_*) at 100 prompt and 10 generated tokens/s takes 10 + 2.4 = 12.4 s.
PROMPT_TPS, GEN_TPS = 100.0, 10.0
DECISION_S = 12.4


@pytest.fixture
def local_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """--local served by a scripted server that answers every call with the same action,
    with the speed measurement stubbed to PROMPT_TPS and GEN_TPS and no capability probe."""
    from diagym.analysis import llm_runs
    from diagym.llm_policies.client import local_server, local_speed

    with FakeServer(scripted([], Reply(content='{"operation": 0, "candidate": 0}'))) as server:
        @contextlib.contextmanager
        def running(*_args: object, model: str = local_server.DEFAULT_MODEL,
                    **_kwargs: object) -> Iterator[object]:
            yield types.SimpleNamespace(base_url=server.base_url, n_ctx=8192,
                                        model=local_server.LOCAL_MODELS[model])

        monkeypatch.setattr(local_server, "running_server", running)
        monkeypatch.setattr(local_speed, "measure", lambda *_a, **_k: local_speed.Speed(
            prompt_tps=PROMPT_TPS, gen_tps=GEN_TPS, prompt_tokens=400, seconds=5.0))
        monkeypatch.setattr(llm_runs, "probe_server",
                            lambda settings, *_args, **_kwargs: settings)
        yield server


def _estimate_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("estimate: ")]
    assert len(lines) == 1, err
    return lines[0]


def test_run_prints_the_whole_runs_estimate(local_model: FakeServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """20 episodes of StatefulWorkflow-v0 with R = 1: up to N + R = 9 decisions each, 8 when
    none fails; 160 x 12.4 s = 33 min, 180 x 12.4 s = 37 min."""
    assert main(["run", "--env", "StatefulWorkflow-v0", "--env-kwargs",
                 '{"error_allowance": 1}', "--policy", "llm", "--local", "--episodes", "20",
                 "--json"]) == 0
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 12 s a decision; 20 episodes of up to 9 decisions (8 when none "
        "fails): about 33 min when none fails, up to 37 min")


def test_run_names_the_re_asks_it_does_not_count(local_model: FakeServer,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--local",
                 "--episodes", "3", "--invalid-retries", "2", "--json"]) == 0
    # 3 x 8 decisions x 12.4 s = 298 s
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 12 s a decision; 3 episodes of up to 8 decisions: up to 5 min; each "
        "of up to 2 re-asks after an invalid reply adds a call")


def test_diagnose_prints_the_batterys_estimate(local_model: FakeServer,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--budget 20 over the battery's shares: the decisions in all are the sum of each
    configuration's episodes times its N (none failing) and N + R (at most)."""
    from diagym.analysis.diagnose.battery import DEFAULT_BATTERY, DEFAULT_SHARES, allocate

    allocation = allocate(DEFAULT_SHARES, 20)
    played = list(zip(allocation, DEFAULT_BATTERY, strict=True))
    none_fail = sum(k * spec.n_ops for k, spec in played)
    most = sum(k * (spec.n_ops + spec.error_allowance) for k, spec in played)
    assert (none_fail, most) == (160, 196)  # 33 and 41 min at 12.4 s a decision
    assert main(["diagnose", "--policy", "llm", "--local", "--budget", "20", "--json"]) == 0
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 12 s a decision; 20 episodes of up to 196 decisions in all (160 when "
        "none fails): about 33 min when none fails, up to 41 min")


def test_a_dacs_diagnosis_prints_its_estimate(local_model: FakeServer,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """4 configurations x 1 episode x N x D = 15 answers: 60 x 12.4 s = 12 min."""
    assert main(["diagnose", "--env", "DACSSteering-v0", "--policy", "llm", "--local",
                 "--budget", "4", "--json"]) == 0
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 12 s a decision; 4 episodes of up to 15 decisions: up to 12 min")


def test_llm_study_prints_the_designs_estimate(local_model: FakeServer,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """8 fractional cells x 1 seed x 2 harnesses = 16 episodes of N = 8 decisions (R = 0):
    128 x 12.4 s = 26 min."""
    assert main(["llm-study", "--design", "fractional", "--seeds", "1", "--local",
                 "--harness", "json,chat", "--json"]) == 0
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 12 s a decision; 16 episodes of up to 8 decisions: up to 26 min")


@pytest.mark.parametrize(("decision_s", "expected"), [
    (0.5, "up to 4 s"), (600.0, "up to 80 min"), (1200.0, "up to 2.7 h")])
def test_the_duration_reads_in_seconds_minutes_or_hours(decision_s: float,
                                                        expected: str) -> None:
    from diagym.analysis.cli.estimate import run_plan, whole_run_estimate
    from diagym.envs.workflow.params import WorkflowParams

    plan = run_plan([(1, WorkflowParams())])
    assert plan is not None
    assert whole_run_estimate(decision_s, plan).endswith(f": {expected}")


def test_focus_actions_raise_a_dacs_episodes_most_decisions() -> None:
    """With agent_chosen_focus a request takes up to N focus actions before its answer."""
    from diagym.analysis.cli.estimate import run_plan
    from diagym.envs.dacs.params import DacsParams

    plan = run_plan([(2, DacsParams(n_agents=5, decisions=3, agent_chosen_focus=True))])
    assert plan is not None and (plan.decisions, plan.most) == (30, 180)
    assert run_plan([(2, None)]) is None  # an env of no diagym family: decisions unknown


def test_the_estimate_counts_the_reasoning_budget_as_output(
        local_model: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--reasoning-tokens 76: a decision writes up to 24 + 76 tokens, 10 + 100 / 10 = 20 s;
    3 x 8 decisions x 20 s = 8 min."""
    assert main(["run", "--env", "StatefulWorkflow-v0", "--policy", "llm", "--local",
                 "--episodes", "3", "--reasoning-tokens", "76", "--json"]) == 0
    err = capsys.readouterr().err
    assert _estimate_line(err) == (
        "estimate: about 20 s a decision; 3 episodes of up to 8 decisions: up to 8 min")
    assert "and up to 100 output tokens (--reasoning-tokens 76 counted in full)" in err


def test_the_reasoning_design_estimates_its_levels_at_the_largest_budget(
        local_model: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """8 fractional cells x 1 seed x 3 budget levels = 24 episodes of 8 decisions, each
    decision at the largest budget (an upper end): 10 + (24 + 1,024) / 10 = 114.8 s;
    192 x 114.8 s = 6.1 h."""
    assert main(["llm-study", "--design", "reasoning", "--seeds", "1", "--local",
                 "--json"]) == 0
    assert _estimate_line(capsys.readouterr().err) == (
        "estimate: about 115 s a decision; 24 episodes of up to 8 decisions: up to 6.1 h")
