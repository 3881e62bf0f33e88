"""`diagym train`: an SB3 agent on a registered env, with its held-out learning curve."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from diagym.analysis.cli.flags_general import MAX_COUNT, add_env_kwargs, bounded_int, json_object
from diagym.analysis.cli.outputs import writable_dir

MAX_N_ENVS = 1024  # one process steps them all: beyond this the rollout buffer outgrows memory
# said in --arch's help and after an mlp run, as docs/RL.md's "Why `mlp` stays the default"
MLP_AT_THE_FLOOR = ("mlp, the default, stays near 0% held-out success on the default env "
                    "(StatefulWorkflow-v0: 0.0% after 1M steps) while entity learns it (95% "
                    "after 100k steps); mlp stays the default as SB3's own network, the "
                    "baseline an SB3 user compares against")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a Stable-Baselines3 agent on a registered env; save model and curve",
        description=(
            "Train PPO, MaskablePPO or RecurrentPPO on --env and write DIR/model.zip, "
            "DIR/config.json, DIR/curve.csv (held-out success and return by steps) and "
            "DIR/curve.png. StatefulWorkflow ids train on the numba VecEnv with one-hot "
            "observations; evaluate later with `diagym run --policy sb3:DIR/model.zip`. "
            "Each evaluation checkpoint saves model.zip before appending its curve row, so a "
            "killed run can be continued with --resume."
        ),
    )
    parser.add_argument("--algo", choices=("ppo", "maskable-ppo", "recurrent-ppo"),
                        required=True,
                        help="ppo, maskable-ppo (needs an env with action masks: the "
                             "StatefulWorkflow ids) or recurrent-ppo (LSTM); required")
    parser.add_argument("--arch", choices=("mlp", "entity", "entity-lstm"), default="mlp",
                        help="the network: mlp (SB3's MultiInputPolicy over the one-hot "
                             "fields), entity (operation and register tokens, attention, "
                             "per-(operation, slot) logits; with ppo or maskable-ppo) or "
                             "entity-lstm (the same with an LSTM memory; with recurrent-ppo); "
                             "see docs/RL.md. " + MLP_AT_THE_FLOOR.replace("%", "%%")
                             + " (default: %(default)s)")
    parser.add_argument("--env", required=True, metavar="ID",
                        help="a registered env id (required)")
    add_env_kwargs(parser)
    parser.add_argument("--steps", type=bounded_int(1, MAX_COUNT), required=True, metavar="N",
                        help="environment steps to train for in all, >= 1 (required)")
    parser.add_argument("--n-envs", type=bounded_int(1, MAX_N_ENVS), default=8, metavar="K",
                        help=f"environments stepped together, 1..{MAX_N_ENVS}; --n-envs "
                             "x n_steps rollout entries must fit in the memory available, "
                             "or the run is refused before it starts (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="seed of the model and the training tasks (default: %(default)s)")
    parser.add_argument("--eval-episodes", type=bounded_int(1), default=64, metavar="E",
                        help="held-out episodes per curve point (default: %(default)s)")
    parser.add_argument("--multi-discrete", action="store_true",
                        help="independent (operation, candidate) heads instead of the joint "
                             "Discrete(N*b) action (default: off)")
    parser.add_argument("--raw-obs", action="store_true",
                        help="raw integer observations instead of one-hot (default: off)")
    parser.add_argument("--hyperparameters", type=json_object, default={}, metavar="JSON",
                        help="algorithm keyword arguments over the defaults, e.g. "
                             "'{\"n_epochs\": 4, \"batch_size\": 512}' (default: none, "
                             "train's own defaults)")
    parser.add_argument("--eval-every", type=bounded_int(0), default=0, metavar="STEPS",
                        help="steps between held-out evaluations (default: %(default)s, "
                             "about 20 in all)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for model.zip, config.json and the curve, checked "
                             "writable before training (required)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in DIR up to --steps (same settings "
                             "otherwise; curve rows are kept); without a model in DIR, start "
                             "afresh. Without --resume a DIR holding a run is refused "
                             "(default: off)")
    parser.add_argument("--trust-model", action="store_true",
                        help="with --resume, load a model.zip whose hash diagym train did not "
                             "write (model.zip is a pickle: loading it runs any code it holds; "
                             "default: off, such a model is refused)")
    parser.set_defaults(func=run)


def available_bytes() -> int:
    """Memory this process may still take: the kernel's MemAvailable (page cache it would
    drop counts), else physical memory."""
    import os

    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def rollout_bytes(config: Any) -> int:
    """What SB3's rollout buffer takes for `config`: n_steps x n_envs entries, each the
    observation as the agent sees it (in its space's dtype), the action and the per-step
    floats (reward, value, log-probability, advantage, return, episode start)."""
    import numpy as np

    from diagym.analysis.training import default_hyperparameters
    from diagym.controllers.sb3.policy import make_single_env

    hyper = {**default_hyperparameters(config.algo, config.arch), **config.hyperparameters}
    n_steps = hyper.get("n_steps")
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
        return 0  # train refuses it with its own line
    env = make_single_env(config.env, config.env_kwargs, config.joint_actions, config.one_hot)
    try:
        spaces = getattr(env.observation_space, "spaces", {"obs": env.observation_space})
        step = sum(int(np.prod(space.shape or (1,))) * np.dtype(space.dtype or np.float32).itemsize
                   for space in spaces.values())
        step += 4 * (int(np.prod(env.action_space.shape or (1,))) + 6)
    finally:
        env.close()
    return step * n_steps * config.n_envs


def check_memory(config: Any) -> None:
    """ValueError when the rollout buffer cannot fit in memory: numpy would fail allocating
    it (a traceback) or, under overcommit, the kernel would kill the run mid-training."""
    needed, available = rollout_bytes(config), available_bytes()
    if needed > available:
        n_steps = {**config.hyperparameters}.get("n_steps", "the default n_steps")
        raise ValueError(
            f"--n-envs {config.n_envs} x n_steps {n_steps}: the rollout buffer needs "
            f"{needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB of memory "
            "available; lower n_steps (--hyperparameters) or --n-envs")


def run(args: argparse.Namespace) -> int:
    import diagym  # noqa: F401  (registers the ids)
    from diagym.analysis.training import TrainConfig, read_curve, train

    config = TrainConfig(algo=args.algo, arch=args.arch, env=args.env, env_kwargs=args.env_kwargs,
                         steps=args.steps, n_envs=args.n_envs, seed=args.seed,
                         joint_actions=not args.multi_discrete, one_hot=not args.raw_obs,
                         eval_episodes=args.eval_episodes, eval_every=args.eval_every,
                         hyperparameters=args.hyperparameters)
    writable_dir("--out", args.out)
    check_memory(config)
    model = train(config, args.out, progress=True, resume=args.resume,
                  trust_model=args.trust_model)
    last = read_curve(args.out / "curve.csv")[-1]
    print(f"{args.algo} ({args.arch}) on {args.env}: {int(last['steps']):,} steps in "
          f"{last['wall_s']:.0f} s; "
          f"held-out success {100 * last['success']:.1f}%")
    print(f"model: {model}\ncurve: {args.out / 'curve.csv'} and {args.out / 'curve.png'}")
    if args.arch == "mlp":
        print(f"note: {MLP_AT_THE_FLOOR}; pass --arch entity to train the one that learns")
    return 0
