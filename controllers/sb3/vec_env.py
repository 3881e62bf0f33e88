"""StatefulWorkflow as a native Stable-Baselines3 VecEnv, stepped by one numba loop.

SB3 does not take Gymnasium VectorEnvs, so `gym.make_vec` (StatefulWorkflowVectorEnv) cannot
feed PPO; DummyVecEnv over `gym.make` envs can, but then every env step is a Python call, and
the env, not the network, dominates a small-policy training run. This class keeps the env's
numba rows and speaks SB3's API: a finished env is reset in the same step (the kernel in
envs/workflow/autoreset.py generates its next task at once), its last observation goes to
info["terminal_observation"], and info["episode"] has Monitor's {"r", "l", "t"} so SB3 logs
ep_rew_mean / ep_len_mean without a Monitor wrapper.

Seeding follows DummyVecEnv over `gym.make` envs exactly: seed(s) then reset() gives env i the
task seed s + i, each later episode the next seed of its chain (rng.next_seed), as a single env
reset() without a seed; so both paths give the same trajectories for the same actions (tested).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from diagym import envs
from diagym.controllers.sb3.actions import JointActionWrapper, decode_joint, joint_masks
from diagym.envs._core import rng
from diagym.envs.workflow.autoreset import step_batch_reset_now, warm_up
from diagym.envs.workflow.generator import reset_batch
from diagym.envs.workflow.kernel import allocate_rows
from diagym.envs.workflow.layout import (
    CALLS,
    SEED,
    SUCCESSES,
    RowView,
    observation_space_for,
)
from diagym.envs.workflow.params import WorkflowParams

_MAX_SEED = 2**63


class WorkflowVecEnv(VecEnv):
    """`num_envs` StatefulWorkflow envs of one spec behind SB3's VecEnv API.

    env_id: a registered StatefulWorkflow id whose preset kwargs are the defaults;
    spec_kwargs: any WorkflowParams field, as for `gym.make`.
    joint_actions: False gives MultiDiscrete([N, b]) actions and (num_envs, N + b) masks; True
        gives Discrete(N * b) actions, k = (k // b, k % b), and (num_envs, N * b) masks
        (diagym.controllers.sb3.actions, the encoding JointActionWrapper uses for single envs).
    monitor: True puts Monitor's info["episode"] = {"r", "l", "t"} on each finished episode and
        reports env_is_wrapped(Monitor) as True (the info contract is Monitor's); False leaves
        episode statistics to SB3's VecMonitor.

    Every step's info has success, failure (the single env's code; names in
    envs/_core/failures.py) and task_seed of the episode that was stepped, and
    TimeLimit.truncated (always False: episodes end only by
    completion or by exceeding the error allowance).
    """

    PER_ENV_METHODS = ("action_masks",)

    def __init__(self, num_envs: int = 1, *, env_id: str = "StatefulWorkflow-v0",
                 joint_actions: bool = False, monitor: bool = True,
                 **spec_kwargs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise ValueError(f"num_envs must be an integer >= 1; got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1; got {num_envs}")
        presets = envs.FAMILIES[envs.WORKFLOW].presets
        if env_id not in presets:
            raise ValueError(f"env_id must be one of {sorted(presets)}; got {env_id!r}")
        self.params = WorkflowParams.from_kwargs(**{**presets[env_id], **spec_kwargs})
        warm_up()
        self.joint_actions = bool(joint_actions)
        self.monitor = bool(monitor)
        self.render_mode = None
        spec = self.params
        n, b = spec.n_ops, spec.candidates
        self._n, self._b = n, b
        self._params = spec.to_params()
        e = int(num_envs)
        self._task, self._state, self._work, self._obs = allocate_rows(self._params, e)
        self._actions = np.zeros((e, 2), dtype=np.int64)
        self._pending: np.ndarray | None = None
        self._started = False
        self._np_random = np.random.default_rng()
        self._t_start = time.time()
        self._view = RowView(n, b)
        self._mask = self._view.action_mask
        self._field_names = (*(name for name, _, _ in self._view.arrays),
                             *(name for name, _ in self._view.scalars))
        # Monitor's episode return (a sum of 1/N rewards rounded to 6 digits), by successes.
        self._returns = [round(k / n, 6) for k in range(n + 1)]
        action_space: spaces.Space = (
            spaces.Discrete(n * b) if self.joint_actions else spaces.MultiDiscrete([n, b])
        )
        super().__init__(e, observation_space_for(spec), action_space)


    # -- SB3 VecEnv API ------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        """Start an episode in every env: the seed from seed() if one is pending, else the next
        seed of the env's chain (a random one before any seed), as DummyVecEnv's reset()."""
        e = self.num_envs
        seeds = np.empty(e, dtype=np.int64)
        for i, pending in enumerate(self._seeds):
            if pending is not None:
                seeds[i] = pending
            elif self._started:
                seeds[i] = rng.next_seed(self._state[i, SEED])
            else:
                seeds[i] = self._np_random.integers(0, _MAX_SEED - 1)
        reset_batch(self._params, seeds, self._task, self._state, self._work, self._obs)
        self._started = True
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{"task_seed": int(s)} for s in seeds]
        task, obs, state = self._task.copy(), self._obs.copy(), self._state.copy()
        return self._observation(task, obs, state)

    def step_async(self, actions: np.ndarray) -> None:
        acts = np.asarray(actions)
        e = self.num_envs
        shape = (e,) if self.joint_actions else (e, 2)
        if acts.shape != shape or acts.dtype.kind not in "iu":
            raise ValueError(f"actions must be an integer array of shape {shape}; got dtype "
                             f"{acts.dtype} and shape {acts.shape}")
        if self.joint_actions:
            decode_joint(acts, self._b, out=self._actions)
        else:
            self._actions[...] = acts
        self._pending = acts

    def step_wait(self) -> VecEnvStepReturn:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._pending is None:
            raise RuntimeError("call step_async() before step_wait()")
        submitted, self._pending = self._pending, None
        e = self.num_envs
        rewards = np.empty(e, dtype=np.float32)
        dones = np.empty(e, dtype=np.bool_)
        failures = np.empty(e, dtype=np.int8)
        step_state = np.empty_like(self._state)
        final_task = np.empty_like(self._task)
        final_obs = np.empty_like(self._obs)
        bad = step_batch_reset_now(self._params, self._actions, self._task, self._state,
                                   self._work, self._obs, rewards, dones, failures, step_state,
                                   final_task, final_obs)
        if bad >= 0:
            allowed = (f"an integer in 0..{self._n * self._b - 1}" if self.joint_actions else
                       f"(operation, candidate) with operation in 0..{self._n - 1} and "
                       f"candidate in 0..{self._b - 1}")
            raise ValueError(f"actions[{bad}] must be {allowed}; got {submitted[bad].tolist()}")
        observation = self._observation(self._task.copy(), self._obs.copy(), self._state.copy())
        n = self._n
        infos: list[dict[str, Any]] = [
            {"success": s == n, "failure": f, "task_seed": t, "TimeLimit.truncated": False}
            for s, f, t in zip(step_state[:, SUCCESSES].tolist(), failures.tolist(),
                               step_state[:, SEED].tolist(), strict=True)
        ]
        finished = np.flatnonzero(dones)
        if finished.size:
            self._finish_episodes(infos, finished, final_task, final_obs, step_state)
        return observation, rewards, dones, infos

    def _finish_episodes(self, infos: list[dict[str, Any]], finished: np.ndarray,
                         final_task: np.ndarray, final_obs: np.ndarray,
                         step_state: np.ndarray) -> None:
        """terminal_observation, episode and reset_infos for the envs that just finished.

        Under random actions nearly every env finishes every step, so this is the hot part of
        step_wait: the finished rows are gathered once and split into per-env views by numpy
        iteration rather than indexed field by field.
        """
        task, obs, state = final_task[finished], final_obs[finished], step_state[finished]
        sources = (task, obs)
        columns = [list(sources[src][:, cut]) for _, src, cut in self._view.arrays]
        # numpy scalars, as the single env gives
        columns.extend(list(state[:, index]) for _, index in self._view.scalars)
        names = self._field_names
        rows = finished.tolist()
        new_seeds = self._state[finished, SEED].tolist()
        for i, values, new_seed in zip(rows, zip(*columns, strict=True), new_seeds, strict=True):
            infos[i]["terminal_observation"] = dict(zip(names, values, strict=True))
            self.reset_infos[i] = {"task_seed": new_seed}
        if self.monitor:
            elapsed = round(time.time() - self._t_start, 6)
            returns = self._returns
            for i, successes, calls in zip(rows, state[:, SUCCESSES].tolist(),
                                           state[:, CALLS].tolist(), strict=True):
                infos[i]["episode"] = {"r": returns[successes], "l": calls, "t": elapsed}

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Env i plays task seed seed + i from the next reset() (a random base if None)."""
        if seed is None:
            seed = int(self._np_random.integers(0, np.iinfo(np.uint32).max))
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not (
            0 <= seed and seed + self.num_envs <= _MAX_SEED
        ):
            raise ValueError(f"seed must be an integer in 0..2**63-num_envs; got {seed!r}")
        self._seeds = [int(seed) + i for i in range(self.num_envs)]
        return self._seeds

    def close(self) -> None:
        """Nothing to release: the rows are numpy arrays."""

    def action_masks(self) -> np.ndarray:
        """(num_envs, N + b) bool for MultiDiscrete actions (ready operations, then slots), or
        (num_envs, N * b) joint masks for joint_actions=True."""
        masks = self._obs[:, self._mask].view(np.bool_)
        if self.joint_actions:
            return joint_masks(masks, self._n, self._b)
        return masks.copy()

    # -- attribute access (what sb3-contrib's get_action_masks / is_masking_supported use) -----
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The attribute of this object, once per index: all envs share one spec."""
        value = getattr(self, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set a shared attribute; the envs share one object, so only for all envs at once."""
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError("WorkflowVecEnv's envs share their attributes; set_attr needs "
                             "indices=None (all envs)")
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """Per-env results of a batch method (PER_ENV_METHODS): env_method("action_masks")
        gives one mask row per env, the list sb3-contrib stacks."""
        if method_name not in self.PER_ENV_METHODS:
            raise AttributeError(f"WorkflowVecEnv has no per-env method {method_name!r}; "
                                 f"it has {list(self.PER_ENV_METHODS)}")
        batch = getattr(self, method_name)(*method_args, **method_kwargs)
        return [batch[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper],
                       indices: VecEnvIndices = None) -> list[bool]:
        """True for Monitor when monitor=True and for JointActionWrapper when joint_actions=True:
        the layers whose behaviour this class provides."""
        layers = [Monitor] if self.monitor else []
        if self.joint_actions:
            layers.append(JointActionWrapper)
        wrapped = any(issubclass(layer, wrapper_class) for layer in layers)
        return [wrapped for _ in self._get_indices(indices)]

    # -- observations ----------------------------------------------------------------------
    def _observation(self, task: np.ndarray, obs: np.ndarray,
                     state: np.ndarray) -> dict[str, np.ndarray]:
        """Per-field views of fresh buffers (a batch or one env's rows, never the env's own)."""
        return self._view.observation(task, obs, state)
