"""`diagym diagnose`: which calibrated mechanism an agent's StatefulWorkflow failures fit,
played live on the battery (--policy) or read from a run log (--log without --policy)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from analysis.cli.common import (
    OutputError,
    add_llm_flags,
    add_log_flags,
    bounded_int,
    fail,
    llm_endpoint,
    refuse_chat_flags,
    refuse_served_flags,
    stopped_at_cost_limit,
    writable_dir,
    writable_file,
)
from analysis.cli.run import TEXT_ORACLE, _policy_name

ENV = "StatefulWorkflow-v0"


def add_parser(subparsers: Any) -> None:
    from analysis.diagnose.battery import DEFAULT_BUDGET

    parser = subparsers.add_parser(
        "diagnose",
        help="name the mechanism that breaks an agent, from its own traces",
        description=(
            "Play --policy on the diagnosis battery (10 StatefulWorkflow configurations "
            "chosen to separate the reference mechanisms; analysis/diagnose/battery.py) and "
            "rank the mechanisms by the likelihood of its episodes' outcomes, attribute each "
            "failed call, and give a verdict per component. With --log and no --policy, "
            "diagnose the episodes and traces a run log already holds, playing nothing."),
    )
    parser.add_argument("--env", default=ENV, metavar="ID",
                        help="the env to diagnose on (default: %(default)s, the only one "
                             "for now)")
    parser.add_argument("--policy", type=_policy_name, metavar="NAME",
                        help="any policy `diagym run` takes (a reference name, llm, "
                             "text-oracle, sb3:DIR/model.zip, package.module:Name or "
                             "path/to/file.py:Name) (default: none: --log is diagnosed)")
    parser.add_argument("--trust-model", action="store_true",
                        help="with --policy sb3:PATH, load a model diagym train did not write "
                             "(model.zip is a pickle: loading runs any code it holds; default: "
                             "refuse it)")
    parser.add_argument("--budget", dest="episode_budget", type=bounded_int(1),
                        default=DEFAULT_BUDGET, metavar="EPISODES",
                        help="episodes over the battery, split by its shares (default: "
                             "%(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of every configuration's first episode; episode i "
                             "plays seed S + i (default: %(default)s)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write diagnosis.json, diagnosis.md and diagnosis.png there "
                             "(default: none)")
    parser.add_argument("--json", action="store_true",
                        help="print the diagnosis as one JSON object (default: a summary)")
    add_log_flags(parser, "with --policy: every episode, call and trace; without: the log "
                          "to diagnose")
    add_llm_flags(parser, budget=False)
    parser.set_defaults(func=diagnose)


@contextlib.contextmanager
def policy_factory(args: argparse.Namespace) -> Iterator[tuple[Callable[[Any], Any], bool]]:
    """(make_policy(env), whether it plays text) for --policy, in every form `run` takes."""
    if args.trust_model and not args.policy.startswith("sb3:"):
        raise ValueError(f"--trust-model loads sb3:PATH models; --policy {args.policy} has none")
    if args.policy == TEXT_ORACLE:
        from analysis.llm_runs import oracle_policy_factory

        refuse_served_flags(args, TEXT_ORACLE)
        yield oracle_policy_factory(system_role=not args.no_system_role, harness=args.harness,
                                    invalid_retries=args.invalid_retries), True
        return
    if args.policy == "llm":
        from analysis.llm_runs import llm_policy_factory, spent_in_log

        with llm_endpoint(args) as settings:
            yield llm_policy_factory(settings, spent_usd=spent_in_log(args.log)), True
        return
    refuse_chat_flags(args, args.policy)
    from controllers.loading import is_import_path, load_policy_factory

    if is_import_path(args.policy):
        factory = load_policy_factory(args.policy)
        yield factory, factory.text_actions
    elif args.policy.startswith("sb3:"):
        from analysis.cli.run import check_model_env
        from controllers.sb3.policy import SB3Policy

        path = args.policy[len("sb3:"):]

        def make_sb3(env: Any) -> Any:
            check_model_env(path, ENV, dict(env.spec.kwargs), env)
            return SB3Policy.load(path, trust=args.trust_model)

        yield make_sb3, False
    else:
        from controllers.registry import make_reference_policy

        yield (lambda env: make_reference_policy(args.policy, env)), False


def _diagnosis(args: argparse.Namespace) -> Any:
    from analysis.diagnose.battery import DEFAULT_SHARES, allocate
    from analysis.diagnose.run import check_seed, diagnose_log, diagnose_policy
    from analysis.progress import progress

    if args.env != ENV:
        raise ValueError(f"--env {args.env}: diagnose plays {ENV} for now")
    if args.policy is None:
        if args.log is None:
            raise ValueError("give --policy NAME (play the battery) or --log RUN.jsonl "
                             "(diagnose a log)")
        if args.resume:
            raise ValueError("--resume continues a diagnosis played with --policy; --log "
                             "without --policy only reads the log")
        refuse_chat_flags(args, "(none)")
        if not args.log.is_file():
            raise ValueError(f"--log {args.log}: no such file")
        return diagnose_log(args.log)
    if args.resume and args.log is None:
        raise ValueError("--resume continues --log FILE.jsonl; give the log to continue")
    allocation = allocate(DEFAULT_SHARES, args.episode_budget)
    check_seed(args.seed, allocation)
    from controllers.runlog import RunLog

    writable_file("--log", args.log)
    RunLog.check_target(args.log, args.resume)
    with policy_factory(args) as (make_policy, text_actions), \
            progress(total=sum(allocation), desc="diagym diagnose", unit="episode") as bar:
        return diagnose_policy(make_policy, allocation=allocation, seed=args.seed,
                               log=args.log, resume=args.resume,
                               workers=getattr(args, "concurrency", 1),
                               text_actions=text_actions,
                               on_record=lambda _record: bar.update(1))


def diagnose(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from analysis.diagnose.report import to_json, write
    from llm_policies.client.prices import CostLimitReached

    try:
        if args.out is not None:
            writable_dir("--out", args.out)
        diagnosis = _diagnosis(args)
    except CostLimitReached as reached:
        return stopped_at_cost_limit("diagnose", reached)
    except (gym.error.Error, OutputError, ValueError, TypeError, RuntimeError,
            OSError) as error:
        return fail("diagnose", error)
    if args.out is not None:
        write(diagnosis, args.out)
    if args.json:
        print(json.dumps(to_json(diagnosis), indent=2, sort_keys=True))
        return 0
    best = diagnosis.ranked[0]
    print(f"{json.dumps(diagnosis.policy, sort_keys=True)} on {diagnosis.env}: "
          f"{diagnosis.episodes} episodes over {len(diagnosis.configurations)} configurations")
    runner_up = (f"; next {diagnosis.ranked[1].mechanism.name} at log-LR "
                 f"{diagnosis.ranked[1].log_lr_to_best:.1f}" if len(diagnosis.ranked) > 1
                 else "")
    print(f"best mechanism: {best.mechanism.name}"
          + (f" (plays as {', '.join(best.aliases)})" if best.aliases else "") + runner_up)
    for text in diagnosis.verdicts.values():
        print(text)
    return 0
