"""The structured SB3 policies: relabelling operations permutes their logits, the head reads
codes only through the bilinear score, and the env's mask is recomputed exactly."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from diagym import envs  # noqa: F401
from diagym.controllers.sb3.entity import MASKED, EntityLstmPolicy, policy_for
from diagym.controllers.sb3.observation import encode
from diagym.controllers.sb3.policy import algo_class, make_vec_env
from diagym.controllers.workflow.adapter import ReferencePolicy

SPEC = {"n_ops": 6, "depth": 3, "width": 3, "candidates": 3}
TINY_NET = {"features_extractor_kwargs": {"d_model": 16, "heads": 2, "layers": 2}}


def _model(algo: str, arch: str, **kwargs: Any) -> Any:
    torch.manual_seed(0)
    vec = make_vec_env("StatefulWorkflow-v0", SPEC, 2, joint_actions=True, seed=0)
    policy_kwargs = dict(TINY_NET)
    if arch == "entity-lstm":
        policy_kwargs["lstm_hidden_size"] = 16
    elif arch == "mlp":
        policy_kwargs = {}
    return algo_class(algo)(policy_for(arch, algo), vec, seed=0, device="cpu", n_steps=16,
                            batch_size=16, policy_kwargs=policy_kwargs, **kwargs)


def _states(count: int) -> list[tuple[dict[str, Any], np.ndarray]]:
    """Observations at the start and in the middle of episodes (the exact controller plays
    a few steps, so completions, pending prerequisites and the last update vary)."""
    env = gym.make("StatefulWorkflow-v0", **SPEC)
    exact = ReferencePolicy.for_env("exact", env)
    out = []
    for seed in range(count):
        observation, info = env.reset(seed=seed)
        exact.reset(seed=seed)
        for _ in range(seed % 4):
            observation, _, done, _, info = env.step(exact.act(observation, info))
            if done:
                break
        out.append((observation, np.asarray(info["action_mask"], dtype=bool)))
    return out


def _relabel(observation: dict[str, Any], order: np.ndarray) -> dict[str, Any]:
    """The same task with operation i renamed order[i] -> i (registers untouched)."""
    n, b = SPEC["n_ops"], SPEC["candidates"]
    out = dict(observation)
    for key in ("query_register", "update_register", "delta", "completed"):
        out[key] = np.asarray(observation[key])[order]
    out["codes"] = np.asarray(observation["codes"]).reshape(n, b)[order].ravel()
    prereq = np.asarray(observation["prereq"]).reshape(n, n)
    out["prereq"] = prereq[np.ix_(order, order)].ravel()
    return out


def _logits(model: Any, observation: dict[str, Any], space: gym.spaces.Dict) -> np.ndarray:
    policy = model.policy
    tensor, _ = policy.obs_to_tensor(encode(observation, space))
    with torch.no_grad():
        features = policy.extract_features(tensor)
        if isinstance(policy, EntityLstmPolicy):  # a fresh episode's memory
            zeros = torch.zeros(1, 1, policy.lstm_actor.hidden_size)
            features, _ = policy.lstm_actor(features[None], (zeros, zeros))
            features = features[0]
        latent = policy.mlp_extractor.forward_actor(features)
        return policy.action_net(latent).numpy()[0]


@pytest.mark.parametrize(("algo", "arch"), [("maskable-ppo", "entity"), ("ppo", "entity"),
                                             ("recurrent-ppo", "entity-lstm")])
def test_relabelling_operations_permutes_the_logits_the_same_way(algo: str, arch: str) -> None:
    model = _model(algo, arch)
    space = gym.make("StatefulWorkflow-v0", **SPEC).observation_space
    n, b = SPEC["n_ops"], SPEC["candidates"]
    rng = np.random.default_rng(0)
    for observation, _ in _states(6):
        order = rng.permutation(n)
        before = _logits(model, observation, space).reshape(n, b)
        after = _logits(model, _relabel(observation, order), space).reshape(n, b)
        np.testing.assert_allclose(after, before[order], rtol=1e-4, atol=1e-4)


def test_the_flat_mlp_is_not_relabelling_invariant() -> None:
    """Positive control: the same check tells an architecture with operation positions
    apart, so the invariance above is the entity design's, not the test's."""
    model = _model("maskable-ppo", "mlp")
    space = gym.make("StatefulWorkflow-v0", **SPEC).observation_space
    n, b = SPEC["n_ops"], SPEC["candidates"]
    observation, _ = _states(1)[0]
    order = np.roll(np.arange(n), 1)
    before = _logits(model, observation, space).reshape(n, b)
    after = _logits(model, _relabel(observation, order), space).reshape(n, b)
    assert not np.allclose(after, before[order], atol=1e-4)


@pytest.mark.parametrize(("algo", "arch"), [("maskable-ppo", "entity"),
                                             ("recurrent-ppo", "entity-lstm")])
def test_logits_are_masked_exactly_where_the_env_masks(algo: str, arch: str) -> None:
    model = _model(algo, arch)
    space = gym.make("StatefulWorkflow-v0", **SPEC).observation_space
    n, b = SPEC["n_ops"], SPEC["candidates"]
    for observation, mask in _states(8):
        logits = _logits(model, observation, space).reshape(n, b)
        np.testing.assert_array_equal(logits[:, 0] == MASKED, ~mask[:n])
        assert np.all(np.abs(logits[mask[:n]]) < 1e3)


def test_slot_logits_depend_on_codes_only_through_the_code_score() -> None:
    """Two slots of one operation carrying the same code get the same logit: the head has no
    per-slot input but the code, so whatever it learns about a slot it learns about codes."""
    model = _model("maskable-ppo", "entity")
    space = gym.make("StatefulWorkflow-v0", **SPEC).observation_space
    n, b = SPEC["n_ops"], SPEC["candidates"]
    observation, _ = _states(1)[0]
    codes = np.asarray(observation["codes"]).reshape(n, b).copy()
    codes[:, 1] = codes[:, 0]
    logits = _logits(model, {**observation, "codes": codes.ravel()}, space).reshape(n, b)
    np.testing.assert_array_equal(logits[:, 0], logits[:, 1])
    assert not np.allclose(logits[:, 0], logits[:, 2])


def test_an_architecture_with_the_wrong_algorithm_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="^arch: 'entity' cannot train with algo "
                                         "'recurrent-ppo'; allowed: mlp with any algo, "
                                         "--arch entity with --algo maskable-ppo"):
        policy_for("entity", "recurrent-ppo")
