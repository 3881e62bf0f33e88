"""`diagym run`: play a policy on a registered env and print the one episode summary."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from analysis.cli.common import (
    add_env_kwargs,
    add_llm_flags,
    add_log_flags,
    bounded_int,
    fail,
    llm_endpoint,
    refuse_chat_flags,
    refuse_served_flags,
    stopped_at_cost_limit,
    writable_file,
)

TEXT_ORACLE = "text-oracle"  # the harness's self-check (analysis.llm_runs.oracle_policy_factory)


def _policy_name(text: str) -> str:
    """argparse type for --policy: a programmed policy, llm, text-oracle, sb3:PATH or an
    import spec (loaded later, so an import error is one line from `run`)."""
    from controllers.loading import FORMS, is_import_path
    from controllers.registry import POLICY_NAMES

    if (text in POLICY_NAMES or text in ("llm", TEXT_ORACLE) or text.startswith("sb3:")
            or is_import_path(text)):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(POLICY_NAMES)}, llm, {TEXT_ORACLE}, sb3:DIR/model.zip or "
        f"your own policy as {FORMS}; got {text!r}")


def add_parser(subparsers: Any) -> None:
    from controllers.registry import POLICY_NAMES

    parser = subparsers.add_parser(
        "run",
        help="run a policy on a registered env and summarise its episodes",
        description=(
            "Play --episodes episodes of --env with --policy through the one runner "
            "(episode i on seed S + i; a reference controller on a StatefulWorkflow env runs "
            "batched, with the same records) and print success with its Wilson 95% interval, "
            "mean completed operations, mean calls and first-failure counts."
        ),
    )
    parser.add_argument("--env", required=True, metavar="ID", help="a registered env id")
    add_env_kwargs(parser)
    parser.add_argument("--policy", required=True, type=_policy_name, metavar="NAME",
                        help="a programmed policy (" + ", ".join(POLICY_NAMES)
                        + "), llm (a chat model behind --base-url), text-oracle (the "
                        "harness's self-check: a programmed reader of the prompts behind the "
                        "LLM harness, no server), sb3:DIR/model.zip (a model saved by "
                        "diagym train) or your own policy as package.module:Name or "
                        "path/to/file.py:Name (a class or function that makes an object with "
                        "reset(*, seed=None) and act(observation, info); with a class "
                        "attribute text_actions = True it plays the env behind the text-action "
                        "wrapper, answering in JSON text like a chat model)")
    parser.add_argument("--trust-model", action="store_true",
                        help="with --policy sb3:PATH, load a model diagym train did not write "
                             "(model.zip is a pickle: loading runs any code it holds; default: "
                             "refuse it)")
    parser.add_argument("--episodes", type=bounded_int(1), required=True, metavar="K",
                        help="episodes to play, >= 1 (required)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of the first episode; episode i plays seed S + i "
                             "(default: %(default)s)")
    add_log_flags(parser, "one line per episode, and per model call", run_flags=True)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the table (default: off)")
    add_llm_flags(parser)
    parser.set_defaults(func=run)


def _play(args: argparse.Namespace) -> Any:
    """The run's episodes, through the one runner."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)
    from controllers.loading import is_import_path, load_policy_factory
    from controllers.rollout import rollout, rollout_parallel

    if args.trust_model and not args.policy.startswith("sb3:"):
        raise ValueError(f"--trust-model loads sb3:PATH models; --policy {args.policy} has none")
    if args.policy in ("llm", TEXT_ORACLE):
        from analysis.llm_runs import llm_policy_factory, make_text_env, oracle_policy_factory
        from analysis.progress import progress

        def make_env() -> Any:
            return make_text_env(args.env, **args.env_kwargs)

        def play(make_policy: Any) -> Any:
            make_policy(make_env())  # fail early on a bad env or spec
            with progress(total=args.episodes, desc="diagym run", unit="episode") as bar:
                return rollout_parallel(
                    make_env, make_policy, args.episodes, seed=args.seed,
                    workers=args.concurrency, log=args.log, resume=args.resume,
                    on_record=lambda _record: bar.update(1), run_name=args.run_name,
                    retry_failed=args.retry_failed)

        if args.policy == TEXT_ORACLE:
            refuse_served_flags(args, TEXT_ORACLE)
            return play(oracle_policy_factory(budget=args.budget,
                                              system_role=not args.no_system_role,
                                              harness=args.harness,
                                              invalid_retries=args.invalid_retries))
        from analysis.llm_runs import spent_in_log

        with llm_endpoint(args) as settings:
            capabilities = settings.capabilities or {}
            args.described = {
                "model": settings.model, "probed_model": capabilities.get("served_model"),
                "harness": settings.harness, "response_format": settings.response_format,
                "temperature": settings.temperature, "llm_seed": settings.seed,
                "invalid_retries": settings.invalid_retries, "capabilities": capabilities}
            return play(llm_policy_factory(settings, spent_usd=spent_in_log(args.log)))
    refuse_chat_flags(args, args.policy)
    if is_import_path(args.policy):
        make_policy = load_policy_factory(args.policy)
        if make_policy.text_actions:
            from analysis.llm_runs import make_text_env

            env = make_text_env(args.env, **args.env_kwargs)
        else:
            env = gym.make(args.env, **args.env_kwargs)
        policy = make_policy(env)
    elif args.policy.startswith("sb3:"):
        from controllers.sb3.policy import SB3Policy

        env = gym.make(args.env, **args.env_kwargs)
        path = args.policy[len("sb3:"):]
        check_model_env(path, args.env, args.env_kwargs, env)
        policy = SB3Policy.load(path, trust=args.trust_model)
    else:
        from controllers.registry import make_reference_policy

        env = gym.make(args.env, **args.env_kwargs)
        policy = make_reference_policy(args.policy, env)
    return rollout(env, policy, args.episodes, seed=args.seed, log=args.log, resume=args.resume,
                   run_name=args.run_name, retry_failed=args.retry_failed)


def check_model_env(path: str, env_id: str, env_kwargs: dict[str, Any], env: Any) -> None:
    """ValueError unless the model at `path` was trained (config.json beside it) on an env with
    the observation and action spaces of `env`: SB3 would otherwise fail with a reshape or
    attribute error at the first step. Equal spaces, not equal kwargs, decide, so a model can
    be evaluated under another feedback mode of the same size."""
    import gymnasium as gym

    from controllers.sb3.policy import CONFIG_NAME

    where = Path(path)
    directory = where.parent if where.suffix == ".zip" else where
    config_path = directory / CONFIG_NAME
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        trained_id, trained_kwargs = str(config["env"]), dict(config["env_kwargs"])
    except FileNotFoundError:
        raise ValueError(f"--policy sb3:{path}: no {config_path} beside the model; pass a "
                         "DIR/model.zip written by diagym train") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"--policy sb3:{path}: {config_path} is not a diagym train config "
                         f"({type(error).__name__}: {error})") from None
    if ":" in trained_id or trained_id not in gym.registry:  # "module:Env" would import
        raise ValueError(f"--policy sb3:{path}: {config_path} names {trained_id!r}, not a "
                         "registered env id")
    trained_env = gym.make(trained_id, **trained_kwargs)
    same = (trained_env.observation_space == env.observation_space
            and trained_env.action_space == env.action_space)
    trained_env.close()
    if not same:
        raise ValueError(
            f"--policy sb3:{path} was trained on {trained_id} {json.dumps(trained_kwargs)}, "
            f"whose observations and actions differ in size from --env {env_id} "
            f"--env-kwargs {json.dumps(env_kwargs)}; evaluate it on an env of its size")


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from analysis.summary import format_summary, summarise
    from controllers.provenance import provenance
    from controllers.runlog import RunLog
    from llm_policies.client.prices import CostLimitReached

    args.described = {}
    try:
        writable_file("--log", args.log)
        RunLog.check_target(args.log, args.resume)
        episodes = _play(args)
    except CostLimitReached as reached:
        return stopped_at_cost_limit("run", reached)
    except (gym.error.Error, ValueError, TypeError, RuntimeError, OSError) as error:
        return fail("run", error)
    summary = summarise(episodes)
    if args.json:
        described = {"env": args.env, "env_kwargs": args.env_kwargs, "policy": args.policy,
                     "task_seeds": [args.seed, args.seed + args.episodes - 1],
                     **args.described}
        print(json.dumps({**summary.to_json(), "run": described,
                          "provenance": provenance()}, indent=2))
        return 0
    print(f"{args.policy} on {args.env} {json.dumps(args.env_kwargs)}: "
          f"{summary.episodes} episodes from seed {args.seed}")
    print(format_summary(summary))
    return 0
