"""Stable-Baselines3 agents: training environments, and trained models behind the Policy API.

An RL baseline is only comparable to the reference controllers and the LLMs if it is played
by the same runner on the same seeds, so a trained model is wrapped as a Policy (`SB3Policy`):
deterministic prediction, action masks for MaskablePPO (the joint Discrete(N*b) encoding when
it was trained with it), recurrent state reset at every episode start for RecurrentPPO. The
training side builds the fast numba VecEnv for StatefulWorkflow ids and DummyVecEnv over
`gym.make` for others (DACSSteering, with the text field dropped: SB3 policies take numbers).
ENCODINGS is the one table of how SB3 sees each env family.

A model.zip is a pickle: loading it runs whatever code it holds, and its config.json names the
env gymnasium is asked to build (an id of the form "module:Env" imports that module). So
`SB3Policy.load` plays only runs this user's `diagym train` wrote, recognised by the record
training keeps of model.zip and config.json in the user's own store at every checkpoint
(`write_model_hash`; controllers/sb3/trust.py), and by a config whose env is a registered
diagym id (`verify_model`); `trust=True` (the CLI's `--trust-model`) loads any model. The hash
training also writes beside the model (MODEL_HASH_NAME) says what the bytes were; it
certifies nothing, since whoever can write the model can write it too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from diagym import envs
from diagym.controllers.files import write_atomically
from diagym.controllers.provenance import file_sha256
from diagym.controllers.sb3.actions import JointActionWrapper, decode_joint, joint_masks
from diagym.controllers.sb3.observation import OneHotObservation, VecOneHot, encode
from diagym.controllers.sb3.trust import (
    MAX_CONFIG_BYTES,
    check_archive,
    read_regular,
    record_trained,
    store_dir,
    was_trained_here,
)

ALGOS = ("ppo", "maskable-ppo", "recurrent-ppo")
CONFIG_NAME = "config.json"
MODEL_NAME = "model.zip"
MODEL_HASH_NAME = "model.zip.sha256"  # sha256sum's format: "<hex digest>  model.zip"
UNTRUSTED = (f"{MODEL_NAME} is a pickle, and loading it runs any code it holds: load only "
             "models you trust (--trust-model loads it anyway)")



def write_model_hash(directory: str | Path) -> Path:
    """Write the sha256 of directory/model.zip to directory/MODEL_HASH_NAME (atomically, so a
    kill leaves the old hash or the new one) and record model.zip with config.json in the
    user's store of trained runs; training calls it after each model save and each rewrite
    of its config, which is what lets `verify_model` recognise the run as its own."""
    directory = Path(directory)
    line = f"{file_sha256(directory / MODEL_NAME)}  {MODEL_NAME}\n"
    path = directory / MODEL_HASH_NAME
    write_atomically(path, lambda handle: handle.write(line.encode()))
    record_trained(directory / MODEL_NAME, directory / CONFIG_NAME)
    return path


def read_config(directory: Path) -> dict[str, Any]:
    """config.json of a run directory, read bounded (a regular file, at most 1 MiB);
    ValueError naming the model otherwise."""
    where = f"model: {directory / MODEL_NAME}"
    try:
        config = json.loads(read_regular(directory / CONFIG_NAME, MAX_CONFIG_BYTES))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"{where} has no readable {CONFIG_NAME} next to it ({error}); "
                         f"{UNTRUSTED}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{where}: {CONFIG_NAME} is not a JSON object; {UNTRUSTED}")
    return config


def verify_model(directory: str | Path) -> dict[str, Any]:
    """The run's config when directory holds a model `diagym train` wrote, else ValueError.

    Checked before anything is unpickled or built: config.json is a JSON object naming a
    registered diagym env id and a known algo, and model.zip's sha256 matches the hash
    training wrote for it."""
    directory = Path(directory)
    model, config_path = directory / MODEL_NAME, directory / CONFIG_NAME
    where = f"model: {model}"
    if not model.is_file():
        raise ValueError(f"{where} does not exist")
    config = read_config(directory)
    env_id = config.get("env")
    if not isinstance(env_id, str) or envs.family_of(env_id, strict=False) is None:
        raise ValueError(f"{where}: {CONFIG_NAME} names env {env_id!r}, not a registered "
                         f"diagym id; {UNTRUSTED}")
    if config.get("algo") not in ALGOS:
        raise ValueError(f"{where}: {CONFIG_NAME} names algo {config.get('algo')!r}, not one "
                         f"of {' | '.join(ALGOS)}; {UNTRUSTED}")
    if not was_trained_here(model, config_path):
        raise ValueError(f"{where} and its {CONFIG_NAME} are not a run this user's `diagym "
                         f"train` wrote (no record of them in {store_dir()}: changed since, "
                         f"copied from elsewhere, or trained as another user); {UNTRUSTED}")
    return config


def algo_class(algo: str) -> Any:
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "recurrent-ppo":
        from sb3_contrib import RecurrentPPO

        return RecurrentPPO
    raise ValueError(f"algo must be one of {' | '.join(ALGOS)}; got {algo!r}")


class NumericObservation(gym.ObservationWrapper):
    """Drops Text fields (DACSSteering's window) so SB3's MultiInputPolicy can read the rest."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        spaces = env.observation_space.spaces
        self.keys = [k for k, s in spaces.items() if not isinstance(s, gym.spaces.Text)]
        self.observation_space = gym.spaces.Dict({k: spaces[k] for k in self.keys})

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {k: observation[k] for k in self.keys}

    def action_masks(self) -> np.ndarray:
        return np.ones(self.env.action_space.n, dtype=bool)


class WorkflowEncoding:
    """StatefulWorkflow for SB3: one-hot observations (diagym.controllers.sb3.observation), the
    joint Discrete(N * b) action encoding (diagym.controllers.sb3.actions) and the numba VecEnv."""

    one_hot = True

    def wrap(self, env: gym.Env, joint_actions: bool, one_hot: bool) -> gym.Env:
        if one_hot:
            env = OneHotObservation(env)
        return JointActionWrapper(env) if joint_actions else env

    def fast_vec(self, env_id: str, env_kwargs: dict[str, Any], n_envs: int,
                 joint_actions: bool) -> Any:
        from diagym.controllers.sb3.vec_env import WorkflowVecEnv

        return WorkflowVecEnv(n_envs, env_id=env_id, joint_actions=joint_actions, **env_kwargs)

    @staticmethod
    def _sizes(observation: dict[str, Any]) -> tuple[int, int]:
        n = int(np.asarray(observation["completed"]).shape[0])
        return n, int(np.asarray(observation["codes"]).shape[0]) // n

    def mask(self, mask: np.ndarray, joint_actions: bool, observation: dict[str, Any]) -> Any:
        if not joint_actions:
            return mask
        n, b = self._sizes(observation)
        return joint_masks(mask[None], n, b)[0]

    def action(self, raw: np.ndarray, joint_actions: bool, observation: dict[str, Any]) -> Any:
        if joint_actions:
            return np.asarray(decode_joint(int(raw), self._sizes(observation)[1]), dtype=np.int64)
        return np.asarray(raw, dtype=np.int64)


class NumericEncoding:
    """An env with a Discrete action and a Dict observation: its numeric fields as they are,
    through DummyVecEnv (DACSSteering)."""

    one_hot = False

    def wrap(self, env: gym.Env, joint_actions: bool, one_hot: bool) -> gym.Env:
        return NumericObservation(env)

    def fast_vec(self, env_id: str, env_kwargs: dict[str, Any], n_envs: int,
                 joint_actions: bool) -> Any:
        return None

    def mask(self, mask: np.ndarray, joint_actions: bool, observation: dict[str, Any]) -> Any:
        return mask

    def action(self, raw: np.ndarray, joint_actions: bool, observation: dict[str, Any]) -> Any:
        return int(raw)


# How SB3 sees each env family: the one place training and SB3Policy look an env's kind up.
ENCODINGS: dict[str, WorkflowEncoding | NumericEncoding] = {
    envs.WORKFLOW: WorkflowEncoding(),
    envs.DACS: NumericEncoding(),
}


def encoding_for(env_id: str) -> WorkflowEncoding | NumericEncoding:
    return ENCODINGS[envs.family_of(env_id)]


def make_single_env(env_id: str, env_kwargs: dict[str, Any], joint_actions: bool,
                    one_hot: bool = False) -> gym.Env:
    """One env as the agent sees it in training (DummyVecEnv path)."""
    return encoding_for(env_id).wrap(gym.make(env_id, **env_kwargs), joint_actions, one_hot)


def make_vec_env(env_id: str, env_kwargs: dict[str, Any], n_envs: int, joint_actions: bool,
                 seed: int, fast: bool = True, one_hot: bool = True) -> Any:
    """The training VecEnv: the family's native VecEnv when it has one, else DummyVecEnv."""
    encoding = encoding_for(env_id)
    one_hot = one_hot and encoding.one_hot
    vec: Any = encoding.fast_vec(env_id, env_kwargs, n_envs, joint_actions) if fast else None
    if vec is not None:
        vec.seed(seed)
        return VecOneHot(vec) if one_hot else vec
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    vec = DummyVecEnv([lambda: Monitor(make_single_env(env_id, env_kwargs, joint_actions,
                                                       one_hot)) for _ in range(n_envs)])
    vec.seed(seed)
    return vec


def small_network_threads() -> None:
    """One torch thread for this process, unless the user chose (OMP_NUM_THREADS): diagym's
    networks are small MLPs, where torch's default of a thread per core spends more on
    synchronising than on arithmetic (64 episodes took 31-101 s, 13-19 s with one thread)."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    torch.set_num_threads(1)


class SB3Policy:
    """A trained SB3 model as a Policy (reset / act), deterministic by default."""

    def __init__(self, model: Any, algo: str, env_id: str, joint_actions: bool,
                 deterministic: bool = True, source: str = "",
                 raw_space: gym.spaces.Dict | None = None) -> None:
        """raw_space: the env's own observation space when the model was trained on one-hot
        observations (diagym.controllers.sb3.observation); None for raw observations."""
        self.model = model
        self.raw_space = raw_space
        self.algo = algo
        self.env_id = env_id
        self.joint_actions = joint_actions
        self.deterministic = deterministic
        self.source = source
        self._keys = list(model.observation_space.spaces)
        self.reset()

    @classmethod
    def load(cls, path: str | Path, deterministic: bool = True,
             trust: bool = False) -> SB3Policy:
        """A model saved by `diagym train` (its config.json and hash sit next to model.zip).

        Without trust, a model `verify_model` does not recognise is refused with a
        ValueError before it is unpickled; trust=True loads it anyway (it runs any code the
        pickle holds)."""
        path = Path(path)
        directory = path.parent if path.suffix == ".zip" else path
        config = read_config(directory) if trust else verify_model(directory)
        check_archive(directory / MODEL_NAME)  # trusted or not: SB3 inflates every entry
        model = algo_class(config["algo"]).load(directory / MODEL_NAME, device="cpu")
        raw = None
        if config.get("one_hot") and encoding_for(config["env"]).one_hot:
            raw = gym.make(config["env"], **config["env_kwargs"]).observation_space
        return cls(model, config["algo"], config["env"], config["joint_actions"],
                   deterministic, source=str(directory / MODEL_NAME), raw_space=raw)

    def describe(self) -> dict[str, Any]:
        return {"sb3": self.algo, "model": self.source, "deterministic": self.deterministic}

    def reset(self, *, seed: int | None = None) -> None:
        self._state = None
        self._start = True

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> Any:
        encoding = encoding_for(self.env_id)
        raw_observation = observation  # the encodings size actions from the raw fields
        if self.raw_space is not None:
            observation = encode(observation, self.raw_space)
        batch = {k: np.asarray(observation[k])[None] for k in self._keys}
        kwargs: dict[str, Any] = {"deterministic": self.deterministic}
        if self.algo == "maskable-ppo":
            mask = np.asarray(info.get("action_mask", []), dtype=bool)
            kwargs["action_masks"] = encoding.mask(mask, self.joint_actions, raw_observation)
        if self.algo == "recurrent-ppo":
            kwargs.update(state=self._state, episode_start=np.array([self._start]))
        action, state = self.model.predict(batch, **kwargs)
        self._state, self._start = state, False
        return encoding.action(np.asarray(action)[0], self.joint_actions, raw_observation)
