"""`diagym run`: play a policy on a registered env and print the one episode summary."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from diagym.analysis.cli.errors import NO_MODEL_CALL_STATUS
from diagym.analysis.cli.flags_chat import add_llm_flags
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    executor_workers,
    open_executor,
)
from diagym.analysis.cli.flags_general import (
    MAX_COUNT,
    HelpValue,
    add_env_kwargs,
    add_log_flags,
    bounded_int,
)
from diagym.analysis.cli.outputs import json_stdout, writable_file
from diagym.analysis.cli.policies import build_policy, policy_name, policy_names
from diagym.analysis.terminal import shown


def add_parser(subparsers: Any) -> None:
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
    policy = parser.add_argument(
        "--policy", required=True, type=policy_name, metavar="NAME",
        help="a programmed policy (%(policy_names)s), llm (a chat model behind --base-url), "
             "text-oracle (the harness's self-check: a programmed reader of the prompts behind "
             "the LLM harness, no server), sb3:DIR/model.zip (a model saved by diagym train) "
             "or your own policy as package.module:Name or path/to/file.py:Name (a class or "
             "function that makes an object with reset(*, seed=None) and act(observation, "
             "info); with a class attribute text_actions = True it plays the env behind the "
             "text-action wrapper, answering in JSON text like a chat model)")
    policy.policy_names = HelpValue(policy_names)  # type: ignore[attr-defined]
    parser.add_argument("--trust-model", action="store_true",
                        help="with --policy sb3:PATH, load a model diagym train did not write "
                             "(model.zip is a pickle: loading runs any code it holds; default: "
                             "refuse it)")
    parser.add_argument("--episodes", type=bounded_int(1, MAX_COUNT), required=True, metavar="K",
                        help="episodes to play, >= 1 (required)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of the first episode; episode i plays seed S + i "
                             "(default: %(default)s)")
    add_log_flags(parser, "one line per episode, and per model call", run_flags=True)
    parser.add_argument("--no-trace", action="store_true",
                        help="with --log, leave out the trace line of each episode of a "
                             "policy of yours or an sb3 model (its actions in order, from "
                             "which `diagym report` replays its decisions and `diagnose --log` "
                             "reads it; at most one action per env step) (default: traced)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the table (default: off)")
    add_llm_flags(parser)
    add_executor_flags(parser)
    parser.set_defaults(func=run)


def traced(make_policy: Any, text_actions: bool) -> Any:
    """make_policy with each episode's actions written as a trace line of the run log
    (controllers/tracing.py), decoded as `diagnose` decodes them for the env's family."""
    from diagym import envs
    from diagym.analysis.diagnose.dacs.replay import option, text_option_decoder
    from diagym.analysis.diagnose.run import text_decoder
    from diagym.controllers.tracing import Traced, pair

    def make(env: Any) -> Any:
        dacs = envs.family_of(env, strict=False) == envs.DACS
        if text_actions:
            decode = text_option_decoder(env) if dacs else text_decoder(env)
        else:
            decode = option if dacs else pair
        return Traced(make_policy(env), decode)

    return make


def _play(args: argparse.Namespace) -> Any:
    """The run's episodes, through the one runner: a chat model's or the text oracle's on
    parallel workers, every other policy's on one env; under --executor ray, every policy's
    on the cluster's workers (--concurrency of them for a chat model)."""
    import gymnasium as gym

    from diagym import envs
    from diagym.analysis.progress import progress
    from diagym.controllers.loading import is_import_path
    from diagym.controllers.policy import FunctionFactory
    from diagym.controllers.rollout import rollout, rollout_parallel

    plan = None
    if args.policy == "llm":  # a local model's whole-run estimate
        from diagym.analysis.cli.estimate import run_plan

        plan = run_plan([(args.episodes, envs.params_of(args.env, args.env_kwargs))])
    with build_policy(args, args.env, args.env_kwargs, plan=plan) as built, \
            open_executor(args, executor_workers(args, built.chat)) as executor:
        args.described = built.described
        factory = built.factory
        if (args.log is not None and not args.no_trace and not built.chat
                and (is_import_path(args.policy) or args.policy.startswith("sb3:"))):
            factory = FunctionFactory(traced(factory, factory.text_actions),
                                      factory.text_actions)
        make_policy = factory.for_executor(executor)
        if factory.text_actions:
            from diagym.analysis.llm_runs import make_text_env

            def make_env() -> Any:
                return make_text_env(args.env, **args.env_kwargs)
        else:
            def make_env() -> Any:
                return gym.make(args.env, **args.env_kwargs)
        env = make_env()  # a bad env or spec fails before any progress is shown
        policy = factory(env)
        bars: list[Any] = []  # opened once the log is open: a refused resume shows none

        def resumed(done: int) -> None:
            bars.append(progress(total=args.episodes, desc="diagym run", unit="episode",
                                 initial=done, resumed_from=args.log))

        try:
            counted = {"on_progress": lambda count: bars[0].update(count),
                       "on_resumed": resumed}
            if built.chat:
                return rollout_parallel(
                    make_env, make_policy, args.episodes, seed=args.seed,
                    workers=args.concurrency, log=args.log, resume=args.resume,
                    run_name=args.run_name, retry_failed=args.retry_failed, executor=executor,
                    **counted)
            if not executor.in_process:
                return rollout_parallel(make_env, make_policy, args.episodes, seed=args.seed,
                                        log=args.log, resume=args.resume,
                                        run_name=args.run_name,
                                        retry_failed=args.retry_failed, executor=executor,
                                        **counted)
            return rollout(env, policy, args.episodes, seed=args.seed, log=args.log,
                           resume=args.resume, run_name=args.run_name,
                           retry_failed=args.retry_failed, **counted)
        finally:
            last_error = getattr(factory, "last_provider_error", None)
            args.last_provider_error = last_error() if callable(last_error) else None
            for bar in bars:
                bar.close()


def run(args: argparse.Namespace) -> int:
    with json_stdout(args.json) as out:
        return _run(args, out)


def _run(args: argparse.Namespace, out: Any) -> int:
    from diagym.analysis.summary import format_summary, summarise
    from diagym.controllers.provenance import provenance
    from diagym.controllers.runlog import RunLog

    args.described, args.last_provider_error = {}, None
    writable_file("--log", args.log)
    check_executor_flags(args)
    RunLog.check_target(args.log, args.resume)
    episodes = _play(args)
    summary = summarise(episodes)
    if args.json:
        described = {"env": args.env, "env_kwargs": args.env_kwargs, "policy": args.policy,
                     "task_seeds": [args.seed, args.seed + args.episodes - 1],
                     **args.described}
        print(json.dumps({**summary.to_json(), "run": described,
                          "provenance": provenance()}, indent=2), file=out)
        return no_model_call(args, summary)
    print(f"{args.policy} on {args.env} {json.dumps(args.env_kwargs)}: "
          f"{summary.episodes} episodes from seed {args.seed}")
    print(format_summary(summary))
    if args.log is not None:
        from diagym.analysis.report import report_hint

        print(report_hint(args.log))
    return no_model_call(args, summary)


def no_model_call(args: argparse.Namespace, summary: Any) -> int:
    """0, or NO_MODEL_CALL_STATUS with one last line on stderr when every episode ended on a
    provider error: a run in which no model call succeeded measured nothing, and a script
    must not read its 0% as the model's (the reason is the last call's error, where known)."""
    from diagym.controllers.runlog import PROVIDER_ERROR

    if not summary.episodes or summary.failures.get(PROVIDER_ERROR, 0) < summary.episodes:
        return 0
    reason = args.last_provider_error
    said = f" (the last: {shown(reason)})" if reason else ""
    print(f"diagym run: error: no model call succeeded: all {summary.episodes} episodes ended "
          f"on a provider error{said}; check --base-url, --model and the key", file=sys.stderr)
    return NO_MODEL_CALL_STATUS
