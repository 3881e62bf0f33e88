"""The reference controllers: one logic, two paths (batched runner and Policy adapter), and
the properties seed 003 states for them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym import envs  # noqa: F401
from diagym.controllers.policy import Policy
from diagym.controllers.rollout import rollout
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.batched import run_controller
from diagym.controllers.workflow.mechanisms import controller_params
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES
from diagym.envs._core.failures import failure_name
from diagym.envs.workflow.params import WorkflowParams

SPECS = [
    WorkflowParams(),
    WorkflowParams(snapshot_period=0, width=8, candidates=8),
    WorkflowParams(family="barriers", depth=2, snapshot_period=2, width=2, candidates=3),
    WorkflowParams(snapshot_period=0, error_allowance=8, candidates=8),
    WorkflowParams(snapshot_period=2, hidden_resampling=True),
    WorkflowParams(n_ops=16, depth=4, snapshot_period=4, locality="clustered", width=8),
    WorkflowParams(n_ops=4, depth=2, labels="reversed", updates="static", snapshot_period=0),
]
SEEDS = np.arange(5, 29)


class _Recorder:
    """Wraps a policy and keeps the actions it took, per episode."""

    def __init__(self, policy: ReferencePolicy) -> None:
        self.policy = policy
        self.actions: list[list[tuple[int, int]]] = []

    def reset(self, *, seed: int | None = None) -> None:
        self.actions.append([])
        self.policy.reset(seed=seed)

    def act(self, observation: Any, info: dict[str, Any]) -> np.ndarray:
        action = self.policy.act(observation, info)
        self.actions[-1].append((int(action[0]), int(action[1])))
        return action

    def episode_counters(self) -> dict[str, int]:
        return self.policy.episode_counters()


def _spec_kwargs(spec: WorkflowParams) -> dict[str, Any]:
    return spec.as_dict()


@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_batched_runner_and_policy_adapter_play_identical_trajectories(name: str) -> None:
    for spec in SPECS:
        batched = run_controller(spec, name, SEEDS, trace_length=spec.n_ops + spec.error_allowance)
        env = gym.make("StatefulWorkflow-v0", **_spec_kwargs(spec))
        player = _Recorder(ReferencePolicy.for_env(name, env))
        records = rollout(env, player, episodes=len(SEEDS), seed=int(SEEDS[0]))
        for i, record in enumerate(records):
            calls = batched["calls"][i]
            expected = [tuple(a) for a in batched["trace"][i, :calls].tolist()]
            assert player.actions[i] == expected, (name, spec, i)
            assert record.success == batched["success"][i]
            assert record.errors == batched["errors"][i]
            for key, value in record.counters.items():
                assert value == batched[key][i], (name, key)


@given(b=st.integers(2, 8), period=st.sampled_from([0, 1, 2]), width=st.integers(1, 8),
       family=st.sampled_from(["chains", "barriers"]))
@settings(max_examples=25, deadline=None)
def test_sham_check_plays_exactly_as_scan_1(b: int, period: int, width: int, family: str) -> None:
    spec = WorkflowParams(family=family, candidates=b, width=width, snapshot_period=period)
    sham = run_controller(spec, "sham-check-4", SEEDS, trace_length=8)
    scan = run_controller(spec, "scan-1", SEEDS, trace_length=8)
    np.testing.assert_array_equal(sham["trace"], scan["trace"])
    # ...while paying min(4, b) checks per call instead of one.
    np.testing.assert_array_equal(sham["checks"], min(4, b) * scan["checks"])


specs = st.builds(
    lambda family, depth_exp, width, b, period, locality, updates, labels, r: WorkflowParams(
        family=family, n_ops=8, depth=2**depth_exp, width=width, candidates=b,
        snapshot_period=period, locality=locality, updates=updates, labels=labels,
        error_allowance=r),
    st.sampled_from(["chains", "barriers"]), st.integers(0, 3), st.integers(1, 8),
    st.integers(2, 8), st.integers(0, 4), st.sampled_from(["balanced", "clustered",
                                                            "concentrated"]),
    st.sampled_from(["additive", "static"]), st.sampled_from(["random", "reversed"]),
    st.integers(0, 3),
)


@given(spec=specs)
@settings(max_examples=40, deadline=None)
def test_unrestricted_controllers_never_fail_on_deterministic_tasks(spec: WorkflowParams) -> None:
    # Residues mod b survive updates mod 8 only when b divides 8 (paper 7.2).
    residue = ("residue-8",) if 8 % spec.candidates == 0 else ()
    for name in ("exact", "precomputed-plan", "indexed", *residue):
        result = run_controller(spec, name, SEEDS)
        assert result["success"].all(), name
        assert (result["calls"] == spec.n_ops).all() and (result["errors"] == 0).all()


@given(b=st.integers(2, 8), n_depth=st.sampled_from([(4, 2), (8, 4), (8, 1)]),
       period=st.sampled_from([0, 1]))
@settings(max_examples=20, deadline=None)
def test_elimination_always_succeeds_at_the_worst_case_allowance(
        b: int, n_depth: tuple[int, int], period: int) -> None:
    n, depth = n_depth
    spec = WorkflowParams(n_ops=n, depth=depth, candidates=b, snapshot_period=period,
                          error_allowance=n * (b - 1))
    result = run_controller(spec, "eliminate", SEEDS)
    assert result["success"].all()
    assert (result["errors"] <= n * (b - 1)).all()


# -- per-decision properties of the scan and the adaptive cache ------------------------------
@dataclass(frozen=True)
class Decision:
    """One call of a controller, with what the test knows independently of the controller:
    the schedule position, whether the registers were shown, the right slot (simulator
    state, read before the call) and the checks the controller paid for it."""

    position: int
    visible: bool
    op: int
    slot: int
    right: int
    checks: int
    failure: str | None


def _decisions(name: str, spec: WorkflowParams, seed: int) -> list[Decision]:
    env = gym.make("StatefulWorkflow-v0", **_spec_kwargs(spec))
    core = env.unwrapped
    policy = ReferencePolicy.for_env(name, env)
    policy.reset(seed=seed)
    observation, info = env.reset(seed=seed)
    out: list[Decision] = []
    terminated, checks = False, 0
    while not terminated:
        visible = bool(observation["registers"][0] >= 0)
        op, slot = (int(x) for x in policy.act(observation, info))
        spent = policy.episode_counters()["checks"] - checks
        checks += spent
        right = core.correct_slot(op)
        position = info["completed_ops"]
        observation, _, terminated, _, info = env.step((op, slot))
        out.append(Decision(position, visible, op, slot, right, spent,
                            failure_name(info["failure"])))
    return out


def _schedule(prereq: np.ndarray) -> list[int]:
    """The smallest-label schedule: the smallest ready operation, success after success."""
    n = prereq.shape[0]
    done = np.zeros(n, dtype=bool)
    order = []
    for _ in range(n):
        v = next(v for v in range(n) if not done[v] and done[prereq[v]].all())
        order.append(v)
        done[v] = True
    return order


deterministic_specs = st.builds(
    lambda family, n_depth, width, b, period, updates, r: WorkflowParams(
        family=family, n_ops=n_depth[0], depth=n_depth[1], width=width, candidates=b,
        snapshot_period=period, updates=updates, error_allowance=r),
    st.sampled_from(["chains", "barriers"]),
    st.sampled_from([(4, 2), (8, 1), (8, 2), (8, 4), (16, 4)]), st.integers(1, 8),
    st.integers(2, 8), st.integers(0, 3), st.sampled_from(["additive", "static"]),
    st.integers(0, 6),
)
SCANS = {"scan-1": 1, "scan-2": 2, "scan-4": 4, "exact": 8, "scan-1+eliminate": 1,
         "fixed-check-4": 4}


@given(spec=deterministic_specs, seed=st.integers(0, 2**63 - 1),
       name=st.sampled_from(sorted(SCANS)))
@settings(max_examples=150, deadline=None)
def test_a_scan_checks_slots_in_order_and_guesses_only_among_unexamined_slots(
        spec: WorkflowParams, seed: int, name: str) -> None:
    """Every decision of a full-retention scan (its values are exact on these tasks): if
    the right slot c is among the first s = min(limit, b), it takes c after c + 1 checks
    (slots 0, 1, .. in order); otherwise it pays s checks and guesses a slot >= s, never an
    examined one, and with elimination never one that already failed for this operation."""
    decisions = _decisions(name, spec, seed)
    limit = min(SCANS[name], spec.candidates)
    eliminate = name.endswith("+eliminate")
    failed: dict[int, set[int]] = {}
    for d in decisions:
        if name == "fixed-check-4":
            assert d.checks == limit  # pays for every slot it may examine, always
        if d.right < limit:
            assert d.slot == d.right and d.failure is None, d
            if name != "fixed-check-4":
                assert d.checks == d.right + 1, d
        else:
            assert d.slot >= limit, d
            if name != "fixed-check-4":
                assert d.checks == limit, d
            if eliminate:
                assert d.slot not in failed.get(d.op, set()), d
        if d.failure == "candidate":
            failed.setdefault(d.op, set()).add(d.slot)
        assert d.failure in (None, "candidate"), d


def test_a_scan_1_guess_reaches_every_unexamined_slot() -> None:
    """Positive control for the property above: over many guesses every unexamined slot is
    chosen (a guess confined to fewer slots would pass the per-decision checks)."""
    spec = WorkflowParams(n_ops=16, depth=1, candidates=4, snapshot_period=1, error_allowance=40)
    chosen: set[int] = set()
    for seed in range(20):
        chosen |= {d.slot for d in _decisions("scan-1", spec, seed) if d.right >= 1}
    assert chosen == {1, 2, 3}


def _next_use_cache(spec: WorkflowParams, decisions: list[Decision], query: np.ndarray,
                    schedule: list[int]) -> list[bool]:
    """Whether next-use-2 holds the queried value at each decision, from the rule in
    docs/CONTROLLERS.md and the public schedule alone: a snapshot at position t refills the
    cache with the (at most) 2 active registers used soonest after t; a successful guess
    inserts the queried register and evicts those used furthest after t (never = n; ties:
    higher index) until 2 remain. Which registers are cached is all this tracks."""
    n = spec.n_ops

    def next_use(register: int, t: int) -> int:
        return next((p for p in range(t + 1, n) if query[schedule[p]] == register), n)

    cache: set[int] = set()
    known = []
    for d in decisions:
        t = d.position
        q = int(query[d.op])
        if d.visible:
            used = sorted((next_use(r, t), r) for r in range(spec.width) if next_use(r, t) < n)
            cache = {r for _, r in used[:2]}
        known.append(d.visible or q in cache)
        if d.failure is None and not known[-1]:
            cache.add(q)
            while len(cache) > 2:
                cache.remove(max(cache, key=lambda r: (next_use(r, t), r)))
    return known


@given(spec=deterministic_specs.filter(lambda s: 8 % s.candidates == 0),
       seed=st.integers(0, 2**63 - 1))
@settings(max_examples=200, deadline=None)
def test_next_use_2_knows_a_value_exactly_when_the_earliest_next_use_cache_holds_it(
        spec: WorkflowParams, seed: int) -> None:
    """Per decision: when the cache computed from the public schedule holds the queried
    register (or the registers are shown) next-use-2 takes the right slot after the checks
    of an in-order scan; otherwise it guesses (no checks). b divides 8 here, so cached
    residues stay exact under updates mod 8."""
    decisions = _decisions("next-use-2", spec, seed)
    env = gym.make("StatefulWorkflow-v0", **_spec_kwargs(spec))
    env.reset(seed=seed)
    task = env.unwrapped.task
    schedule = _schedule(task.prereq)
    known = _next_use_cache(spec, decisions, task.query, schedule)
    for d, has_value in zip(decisions, known, strict=True):
        assert d.op == schedule[d.position], d
        if has_value:
            assert (d.slot, d.checks, d.failure) == (d.right, d.right + 1, None), d
        else:
            assert d.checks == 0, d


@pytest.mark.parametrize("seed", [1673, 2719, 4148])
def test_next_use_2_keeps_the_registers_used_soonest(seed: int) -> None:
    """Known answer: on these seeds one chain queries registers 0, 1, 2, 0, 1, 2, 0, 1 and
    only the initial registers are shown. Position 0 is shown and the cache takes 1 and 2
    (next used at 1 and 2; 0 not until 3). At 3 register 0 is unknown (a guess); after it
    0, 1, 2 are next used at 6, 4, 5, so 0 is evicted again. At 6 the guess of 0 is followed
    by no further use of 0 or 2, and 1 (used at 7) stays. Guesses: at 3 and 6 only, the
    fewest any 2-entry cache can manage here (Belady); evicting the soonest-used register
    instead guesses at 3, 4, 5, 6 and 7."""
    spec = WorkflowParams(n_ops=8, depth=8, width=3, candidates=8, snapshot_period=0,
                          error_allowance=64)
    env = gym.make("StatefulWorkflow-v0", **_spec_kwargs(spec))
    env.reset(seed=seed)
    task = env.unwrapped.task
    assert [int(task.query[v]) for v in _schedule(task.prereq)] == [0, 1, 2, 0, 1, 2, 0, 1]
    decisions = _decisions("next-use-2", spec, seed)
    assert decisions[-1].failure is None and sum(d.failure is None for d in decisions) == 8
    first_tries = [d for i, d in enumerate(decisions)
                   if i == 0 or decisions[i - 1].failure is None]
    assert [d.position for d in first_tries] == list(range(8))
    assert [d.position for d in first_tries if d.checks == 0] == [3, 6]
    for d in first_tries:
        if d.position not in (3, 6):
            assert (d.slot, d.checks) == (d.right, d.right + 1)


def test_residue_tracking_breaks_when_b_does_not_divide_8() -> None:
    spec = WorkflowParams(candidates=3, width=1, snapshot_period=0)
    assert not run_controller(spec, "residue-8", np.arange(200))["success"].all()
    assert run_controller(spec, "exact", np.arange(200))["success"].all()


def test_counters_follow_the_paper_definitions() -> None:
    spec = WorkflowParams(width=4, candidates=8)
    plan = run_controller(spec, "precomputed-plan", SEEDS)
    assert (plan["prep_entries"] == 8 * 8).all() and (plan["lookups"] == 8).all()
    assert (plan["plan_slots"] == 8).all() and (plan["checks"] == 0).all()
    indexed = run_controller(spec, "indexed", SEEDS)
    assert (indexed["prep_entries"] == 64).all() and (indexed["checks"] == 0).all()
    fixed = run_controller(WorkflowParams(candidates=4), "fixed-check-4", SEEDS)
    assert (fixed["checks"] == 4 * fixed["calls"]).all()
    exact = run_controller(spec, "exact", SEEDS)
    assert (exact["cache_entries"] == 4).all() and (exact["value_bits"] == 12).all()
    residue = run_controller(spec, "residue-8", SEEDS)
    assert (residue["value_bits"] == 4 * 3).all()  # log2(8) bits per residue
    cache = run_controller(WorkflowParams(width=8), "cache-2", SEEDS)
    assert (cache["cache_entries"] == 2).all()
    nxt = run_controller(WorkflowParams(n_ops=16, depth=4, snapshot_period=0, width=8),
                         "next-use-2", SEEDS)
    assert (nxt["cache_entries"] == 2).all()  # filled by the first snapshot, never above 2


def test_hidden_resampling_blinds_every_controller_between_snapshots() -> None:
    spec = WorkflowParams(snapshot_period=0, hidden_resampling=True, candidates=8)
    exact = run_controller(spec, "exact", np.arange(2000))
    # The first decision is visible; the second is a guess among 8 slots.
    assert (exact["completed"] >= 1).all()
    reached_third = (exact["completed"] >= 2).mean()
    assert abs(reached_third - 1 / 8) < 4 * np.sqrt(1 / 8 * 7 / 8 / 2000)


def test_reference_policy_is_a_policy_and_rejects_unknown_names() -> None:
    assert isinstance(ReferencePolicy("exact", WorkflowParams()), Policy)
    with pytest.raises(ValueError) as error:
        controller_params("oracle")
    assert str(error.value) == (
        "controller must be one of " + " | ".join(CONTROLLER_NAMES) + "; got 'oracle'"
    )


def test_rollout_resumes_from_its_log_without_losing_or_duplicating(tmp_path: Any) -> None:
    env = gym.make("StatefulWorkflow-v0", snapshot_period=0)
    policy = ReferencePolicy.for_env("cache-2", env)
    whole = rollout(env, policy, episodes=12, seed=40)
    path = tmp_path / "run.jsonl"
    rollout(env, policy, episodes=5, seed=40, log=path)
    with pytest.raises(FileExistsError, match="pass resume=True"):
        rollout(env, policy, episodes=12, seed=40, log=path)
    with path.open("a") as sink:  # an interrupted write
        sink.write('{"type": "episode", "episode_key": "x", "rec')
    resumed = rollout(env, policy, episodes=12, seed=40, log=path, resume=True)
    assert resumed == whole
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["type"] for x in lines].count("session") == 2  # the first session, the resume
    lines = [x for x in lines if x["type"] != "session"]
    assert all(x["type"] == "episode" for x in lines)
    assert sorted(x["record"]["episode"] for x in lines) == list(range(12))
    # Another policy in the same log must be named as another run: nothing of the first is
    # reused.
    other = rollout(env, ReferencePolicy.for_env("exact", env), episodes=3, seed=40, log=path,
                    resume=True, run_name="exact")
    assert all(r.success for r in other)


def test_parallel_rollout_equals_sequential(tmp_path: Any) -> None:
    from diagym.controllers.rollout import rollout_parallel

    def make_env() -> gym.Env:
        return gym.make("StatefulWorkflow-v0", snapshot_period=0, candidates=8)

    sequential = rollout(make_env(), ReferencePolicy("scan-4", WorkflowParams(
        snapshot_period=0, candidates=8)), episodes=30, seed=3)
    parallel = rollout_parallel(make_env, lambda env: ReferencePolicy.for_env("scan-4", env),
                                episodes=30, seed=3, workers=3, log=tmp_path / "p.jsonl")
    assert parallel == sequential


def test_rollout_rejects_bad_arguments() -> None:
    env = gym.make("StatefulWorkflow-v0")
    policy = ReferencePolicy.for_env("exact", env)
    with pytest.raises(ValueError,
                       match=r"^episodes must be an integer in 0\.\.2\*\*63-1; got -1$"):
        rollout(env, policy, episodes=-1)
    with pytest.raises(ValueError, match="reference controllers play StatefulWorkflow envs"):
        ReferencePolicy.for_env("exact", gym.make("CartPole-v1"))
