"""Shared test helpers."""

from __future__ import annotations

from typing import Any

from controllers.workflow.adapter import ReferencePolicy


def play_oracle(env: Any, seed: int) -> tuple[dict[str, Any], float, list[tuple[int, int]]]:
    """One episode of the `exact` reference controller; returns the final info, the return
    and the actions."""
    player = ReferencePolicy.for_env("exact", env)
    player.reset(seed=seed)
    observation, info = env.reset(seed=seed)
    total, actions, terminated = 0.0, [], False
    while not terminated:
        action = player.act(observation, info)
        actions.append((int(action[0]), int(action[1])))
        observation, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        total += reward
    return info, total, actions
