"""`diagym run`: play a policy on a registered env and print the one episode summary."""

from __future__ import annotations

import argparse
import json
from typing import Any

from analysis.cli.common import (
    add_env_kwargs,
    add_llm_flags,
    add_log_flags,
    bounded_int,
    fail,
    llm_endpoint,
)

TEXT_ORACLE = "text-oracle"  # the harness's self-check (analysis.llm_runs.oracle_policy_factory)


def _policy_name(text: str) -> str:
    """argparse type for --policy: a programmed policy, llm, text-oracle, or sb3:PATH."""
    from controllers.registry import POLICY_NAMES

    if text in POLICY_NAMES or text in ("llm", TEXT_ORACLE) or text.startswith("sb3:"):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(POLICY_NAMES)}, llm, {TEXT_ORACLE} or sb3:DIR/model.zip; "
        f"got {text!r}")


def add_parser(subparsers: Any) -> None:
    from controllers.registry import POLICY_NAMES

    parser = subparsers.add_parser(
        "run",
        help="run a policy on a registered env and summarise its episodes",
        description=(
            "Play --episodes episodes of --env with --policy through the one runner "
            "(episode i on seed S + i; a reference controller on a StatefulWorkflow env runs "
            "batched, with the same records) and print success with its Wilson 95%% interval, "
            "mean completed operations, mean calls and first-failure counts."
        ),
    )
    parser.add_argument("--env", required=True, metavar="ID", help="a registered env id")
    add_env_kwargs(parser)
    parser.add_argument("--policy", required=True, type=_policy_name, metavar="NAME",
                        help="a programmed policy (" + ", ".join(POLICY_NAMES)
                        + "), llm (a chat model behind --base-url), text-oracle (the "
                        "harness's self-check: a programmed reader of the prompts behind the "
                        "LLM harness, no server) or sb3:DIR/model.zip (a model saved by "
                        "diagym train)")
    parser.add_argument("--episodes", type=bounded_int(1), required=True, metavar="K")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S")
    add_log_flags(parser, "one line per episode, and per model call", run_flags=True)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    add_llm_flags(parser)
    parser.set_defaults(func=run)


def _play(args: argparse.Namespace) -> Any:
    """The run's episodes, through the one runner."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)
    from controllers.rollout import rollout, rollout_parallel

    if args.policy in ("llm", TEXT_ORACLE):
        from tqdm import tqdm

        from analysis.llm_runs import llm_policy_factory, make_text_env, oracle_policy_factory

        def make_env() -> Any:
            return make_text_env(args.env, **args.env_kwargs)

        def play(make_policy: Any) -> Any:
            make_policy(make_env())  # fail early on a bad env or spec
            with tqdm(total=args.episodes, unit="episode", disable=None) as bar:
                return rollout_parallel(
                    make_env, make_policy, args.episodes, seed=args.seed,
                    workers=args.concurrency, log=args.log, resume=args.resume,
                    on_record=lambda _record: bar.update(1), run_name=args.run_name,
                    retry_failed=args.retry_failed)

        if args.policy == TEXT_ORACLE:
            served = [flag for flag, value in (("--base-url", args.base_url),
                                               ("--local", args.local),
                                               ("--model", args.model)) if value]
            if served:
                raise ValueError(f"--policy {TEXT_ORACLE} answers in this process; it takes no "
                                 + ", ".join(served))
            return play(oracle_policy_factory(budget=args.budget,
                                              system_role=not args.no_system_role))
        with llm_endpoint(args) as settings:
            return play(llm_policy_factory(settings))
    env = gym.make(args.env, **args.env_kwargs)
    if args.policy.startswith("sb3:"):
        from controllers.sb3.policy import SB3Policy

        policy = SB3Policy.load(args.policy[len("sb3:"):])
    else:
        from controllers.registry import make_reference_policy

        policy = make_reference_policy(args.policy, env)
    return rollout(env, policy, args.episodes, seed=args.seed, log=args.log, resume=args.resume,
                   run_name=args.run_name, retry_failed=args.retry_failed)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from analysis.summary import format_summary, summarise
    from controllers.runlog import RunLog

    try:
        RunLog.check_target(args.log, args.resume)
        episodes = _play(args)
    except (gym.error.Error, ValueError, TypeError, RuntimeError, OSError) as error:
        return fail("run", error)
    summary = summarise(episodes)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
        return 0
    print(f"{args.policy} on {args.env} {json.dumps(args.env_kwargs)}: "
          f"{summary.episodes} episodes from seed {args.seed}")
    print(format_summary(summary))
    return 0
