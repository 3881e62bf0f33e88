"""The hidden-resampling stream, seen from outside: only successes advance it.

Under hidden resampling the active registers are redrawn after every success from a stream
keyed by the task seed, so the k-th redraw is the same whatever happened between successes.
A failed call changes no state (seed 003, section 3.1); if it drew from the stream, every
later snapshot would differ. These tests use only what an agent sees (observations, info,
the action mask) and the registered ids, so they hold whatever the env stores internally.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import diagym  # noqa: F401  (registers the ids)

ENV_ID = "StatefulWorkflowHidden-v0"
FAILURE_CODES = {"dependency": 1, "candidate": 2, "completed": 3}


@st.composite
def hidden_specs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(2, 12))
    return {
        "family": draw(st.sampled_from(["chains", "barriers"])),
        "n_ops": n,
        "depth": draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0])),
        "width": draw(st.integers(1, 8)),
        "candidates": draw(st.integers(2, 8)),
        "updates": draw(st.sampled_from(["additive", "static"])),
    }


def _slot_from_observation(observation: dict, op: int, b: int) -> int:
    """The right candidate of `op`, read off a visible observation (public rule: slot a is
    right iff codes[op, a] == x[query[op]] mod b)."""
    registers = observation["registers"]
    assert (registers >= 0).all(), "the registers must be visible to read the right slot"
    target = registers[observation["query_register"][op]] % b
    codes = observation["codes"][op * b:(op + 1) * b]
    return int(np.flatnonzero(codes == target)[0])


def _reference(spec: dict, seed: int) -> tuple[list[tuple[int, int]], list[np.ndarray]]:
    """A clean episode with a snapshot after every success: the actions (smallest ready op,
    right slot from the snapshot) and the registers shown after each success (index 0: the
    initial observation)."""
    env = gym.make(ENV_ID, **spec, snapshot_period=1)
    observation, info = env.reset(seed=seed)
    n, b = spec["n_ops"], spec["candidates"]
    actions, shown = [], [observation["registers"].copy()]
    for _ in range(n):
        op = int(np.flatnonzero(info["action_mask"][:n])[0])
        action = (op, _slot_from_observation(observation, op, b))
        observation, reward, _, _, info = env.step(action)
        assert info["failure"] == 0 and info["resampled"] and reward > 0
        actions.append(action)
        shown.append(observation["registers"].copy())
    assert info["success"]
    return actions, shown


def _failing_call(kind: str, action: tuple[int, int], observation: dict, info: dict, n: int,
                  b: int) -> tuple[int, int] | None:
    """A call that fails with `kind` just before `action` would succeed, or None if the
    state offers no such call (nothing completed yet, nothing blocked)."""
    completed = np.flatnonzero(observation["completed"])
    blocked = np.flatnonzero(~info["action_mask"][:n] & (observation["completed"] == 0))
    if kind == "candidate":
        return action[0], (action[1] + 1) % b
    if kind == "completed" and completed.size:
        return int(completed[0]), 0
    if kind == "dependency" and blocked.size:
        return int(blocked[0]), 0
    return None


@settings(max_examples=120, deadline=None)
@given(spec=hidden_specs(), seed=st.integers(0, 2**63 - 1), period=st.integers(1, 4),
       data=st.data())
def test_failed_calls_leave_every_later_snapshot_unchanged(spec: dict, seed: int, period: int,
                                                           data: st.DataObject) -> None:
    """Replay the clean episode with failed calls inserted before successes: every planned
    call still succeeds (its right slot was read from the clean run) and every snapshot
    shows exactly the registers of the clean run after the same number of successes."""
    actions, shown = _reference(spec, seed)
    n, b = spec["n_ops"], spec["candidates"]
    inserted = data.draw(st.lists(st.sampled_from(sorted(FAILURE_CODES)), min_size=n,
                                  max_size=n), label="failure kind before each success")
    gaps = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n),
                     label="failures before each success")
    env = gym.make(ENV_ID, **spec, snapshot_period=period, error_allowance=2 * n)
    observation, info = env.reset(seed=seed)
    assert np.array_equal(observation["registers"], shown[0])
    errors = 0
    for k, action in enumerate(actions):
        for _ in range(gaps[k]):
            failing = _failing_call(inserted[k], action, observation, info, n, b)
            if failing is None:
                continue
            before = observation["registers"].copy()
            observation, reward, terminated, _, info = env.step(failing)
            errors += 1
            assert (info["failure"], reward, terminated) == (FAILURE_CODES[inserted[k]], 0.0,
                                                             False)
            assert int(observation["failure"]) == FAILURE_CODES[inserted[k]]
            assert not info["resampled"] and info["errors"] == errors
            assert np.array_equal(observation["registers"], before)
        observation, reward, _, _, info = env.step(action)
        assert info["failure"] == 0 and info["resampled"], (k, action)
        if (k + 1) % period == 0:
            assert info["registers_visible"]
            assert np.array_equal(observation["registers"], shown[k + 1]), k
        else:
            assert (observation["registers"] == -1).all()
    assert info["success"] and info["errors"] == errors


def test_a_failure_before_the_first_success_does_not_shift_the_first_redraw() -> None:
    """Known answer on one seed: the registers after the first success are those of the
    clean run, with and without a failed call (wrong slot) first, and they are a redraw
    (differ from the initial registers in some active slot on this seed)."""
    spec = {"width": 8, "candidates": 8}
    _, shown = _reference({**spec, "n_ops": 8, "depth": 8, "family": "chains",
                           "updates": "additive"}, 11)
    assert not np.array_equal(shown[0], shown[1])
    env = gym.make(ENV_ID, **spec, snapshot_period=1, error_allowance=1)
    observation, info = env.reset(seed=11)
    op = int(np.flatnonzero(info["action_mask"][:8])[0])
    right = _slot_from_observation(observation, op, 8)
    _, _, terminated, _, info = env.step((op, (right + 3) % 8))
    assert info["failure"] == FAILURE_CODES["candidate"] and not terminated
    observation, _, _, _, info = env.step((op, right))
    assert info["failure"] == 0
    np.testing.assert_array_equal(observation["registers"], shown[1])
