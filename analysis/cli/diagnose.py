"""`diagym diagnose`: which calibrated mechanism an agent's StatefulWorkflow failures fit, or
which DACS window reader its DACSSteering answers fit (--env DACSSteering-v0): played live on
the battery (--policy; --adaptive chooses each round; --executor ray plays it on Ray) or read
from a run log (--log without --policy)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from diagym.analysis.cli.flags_chat import add_llm_flags, refuse_chat_flags
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    executor_workers,
    open_executor,
)
from diagym.analysis.cli.flags_general import (
    MAX_EPISODES,
    HelpValue,
    add_log_flags,
    bounded_int,
    json_object,
)
from diagym.analysis.cli.outputs import with_json_stdout, writable_dir, writable_file
from diagym.analysis.cli.policies import build_policy, policy_name

ENV = "StatefulWorkflow-v0"
DACS_ENV = "DACSSteering-v0"  # diagym.analysis.diagnose.dacs.ENV_ID


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="name the mechanism that breaks an agent, from its own traces",
        description=(
            "Play --policy on the diagnosis battery (11 StatefulWorkflow configurations: "
            "10 chosen to separate the reference mechanisms and one of the barriers graph "
            "family for forecasts there; analysis/diagnose/battery.py) and "
            "rank the mechanisms by the likelihood of its episodes' outcomes, attribute each "
            "failed call, and give a verdict per component. With --log and no --policy, "
            "diagnose the episodes and traces a run log already holds, playing nothing. With "
            f"--env {DACS_ENV}, play its battery (analysis/diagnose/dacs.py), attribute each "
            "wrong answer (contamination, truncation, distractor) and rank the DACS window "
            "readers, each with its fitted lapse."),
    )
    parser.add_argument("--env", default=ENV, metavar="ID",
                        help=f"the env to diagnose on: %(default)s or {DACS_ENV} "
                             "(default: %(default)s)")
    parser.add_argument("--policy", type=policy_name, metavar="NAME",
                        help="any policy `diagym run` takes (a reference name, llm, "
                             "text-oracle, sb3:DIR/model.zip, package.module:Name or "
                             "path/to/file.py:Name) (default: none: --log is diagnosed)")
    parser.add_argument("--trust-model", action="store_true",
                        help="with --policy sb3:PATH, load a model diagym train did not write "
                             "(model.zip is a pickle: loading runs any code it holds; default: "
                             "refuse it)")
    budget = parser.add_argument(
        "--budget", dest="episode_budget", type=bounded_int(1, MAX_EPISODES),
                        metavar="EPISODES",
                        help="episodes over the battery, split by its shares (a DACS budget "
                             "evenly over its configurations) (default: "
                             "%(default_budgets)s)")
    budget.default_budgets = HelpValue(_default_budgets)  # type: ignore[attr-defined]
    parser.add_argument("--adaptive", action="store_true",
                        help="play rounds of 4 episodes, then single episodes once one "
                             "mechanism leads, each on the configuration most informative "
                             "between the leading mechanisms and their lapse variants, and stop "
                             "when one mechanism holds 0.99 of the posterior or --budget is "
                             "spent (analysis/diagnose/adaptive.py) (default: the fixed "
                             "battery)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of every configuration's first episode; episode i "
                             "plays seed S + i (default: %(default)s)")
    parser.add_argument("--forecast", type=forecast_kwargs, action="append", default=[],
                        metavar="KWARGS_JSON",
                        help=f"{ENV} gym.make kwargs as a JSON object, e.g. "
                             "'{\"width\": 8, \"snapshot_period\": 0}': predict the agent's "
                             "success there from the fitted hypothesis, with an interval "
                             "(repeatable; checkable by playing it) (default: none)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write diagnosis.json, diagnosis.md and diagnosis.png there "
                             "(default: none)")
    parser.add_argument("--json", action="store_true",
                        help="print the diagnosis as one JSON object (default: a summary)")
    add_log_flags(parser, "with --policy: every episode, call and trace; without: the log "
                          "to diagnose; with --inspect-log: where its run log is written")
    parser.add_argument("--inspect-log", type=Path, metavar="FILE.eval",
                        help="diagnose an inspect_ai eval log of the diagym/diagnosis task "
                             "(or any diagym/ task), playing nothing: its samples become a "
                             "run log (--log, else a temporary file) read as --log is "
                             "(needs pip install 'diagym[inspect]') (default: none)")
    add_llm_flags(parser, budget=False)
    add_executor_flags(parser)
    parser.set_defaults(func=with_json_stdout(diagnose))


def _default_budgets() -> str:
    from diagym.analysis.diagnose.defaults import DACS_BATTERY, DACS_EPISODES, DEFAULT_BUDGET

    return f"{DEFAULT_BUDGET} on {ENV}, {DACS_EPISODES * len(DACS_BATTERY)} on {DACS_ENV}"


def forecast_kwargs(text: str) -> dict[str, Any]:
    """--forecast's JSON object of gym.make kwargs, checked by WorkflowParams."""
    from diagym.envs.workflow.params import WorkflowParams

    try:
        kwargs = json_object(text)  # bounded in depth, as every JSON flag is
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error}: an object of {ENV} kwargs, e.g. "
                                         "'{\"width\": 8}'") from None
    try:
        WorkflowParams.from_kwargs(**kwargs)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error).splitlines()[0]) from None
    return kwargs


def _diagnosis(args: argparse.Namespace) -> Any:
    from diagym.analysis.diagnose.run import check_seed, diagnose_log, diagnose_policy
    from diagym.analysis.progress import progress

    if args.adaptive and args.env != ENV:
        raise ValueError(f"--adaptive chooses among {ENV}'s battery configurations; "
                         f"--env {args.env} plays its battery in full")
    if args.env == DACS_ENV:
        if args.forecast:
            raise ValueError(f"--forecast predicts {ENV} success; --env {DACS_ENV} has no "
                             "forecast")
        return _dacs_diagnosis(args)
    if args.env != ENV:
        raise ValueError(f"--env {args.env}: diagnose plays {ENV} or {DACS_ENV}")
    if args.episode_budget is None:
        from diagym.analysis.diagnose.battery import DEFAULT_BUDGET

        args.episode_budget = DEFAULT_BUDGET
    if args.policy is None:
        if args.log is None:
            raise ValueError("give --policy NAME (play the battery) or --log RUN.jsonl "
                             "(diagnose a log)")
        _check_log_only(args)
        from diagym.analysis.diagnose.dacs import holds_dacs_runs

        if holds_dacs_runs(args.log):
            if args.forecast:
                raise ValueError(f"--forecast predicts {ENV} success; {args.log} holds "
                                 f"{DACS_ENV} runs")
            return _dacs_diagnosis(args)
        return diagnose_log(args.log, forecasts=args.forecast)
    if args.resume and args.log is None:
        raise ValueError("--resume continues --log FILE.jsonl; give the log to continue")
    battery, allocation = _battery(args)
    check_seed(args.seed, [args.episode_budget] if args.adaptive else allocation,
               len(battery))
    from diagym.controllers.runlog import RunLog

    writable_file("--log", args.log)
    RunLog.check_target(args.log, args.resume)
    check_executor_flags(args)
    plan = None
    if args.policy == "llm":  # a local model's whole-run estimate
        from diagym.analysis.cli.estimate import run_plan

        # adaptive: up to --budget episodes, each on any configuration of the battery
        plan = run_plan([(args.episode_budget,
                          max(battery, key=lambda spec: spec.episode_decisions()[1]))]
                        if args.adaptive else zip(allocation, battery, strict=True))
    with build_policy(args, ENV, plan=plan) as built, \
            open_executor(args, executor_workers(args, built.chat)) as executor, \
            progress(total=sum(allocation), desc="diagym diagnose", unit="episode",
                     initial=_resumed(args, sum(allocation)), resumed_from=args.log) as bar:
        return diagnose_policy(built.factory.for_executor(executor), battery=battery,
                               allocation=allocation, executor=executor,
                               seed=args.seed,
                               log=args.log, resume=args.resume,
                               workers=getattr(args, "concurrency", 1),
                               text_actions=built.text_actions,
                               on_record=lambda _record: bar.update(1),
                               adaptive_budget=args.episode_budget if args.adaptive else None,
                               forecasts=args.forecast)


def _resumed(args: argparse.Namespace, total: int) -> int:
    """The episodes --log already holds when --resume continues it (the runner plays only
    the others, so progress starts there)."""
    if not args.resume or args.log is None or not args.log.is_file():
        return 0
    from diagym.analysis.diagnose.logs import read_log

    return min(total, sum(len(run.episodes) for run in read_log(args.log).values()))


def _check_log_only(args: argparse.Namespace) -> None:
    """ValueError for the flags a diagnosis read from --log (no --policy) cannot use, and for
    a log that is not there."""
    if args.resume:
        raise ValueError("--resume continues a diagnosis played with --policy; --log "
                         "without --policy only reads the log")
    if args.adaptive:
        raise ValueError("--adaptive chooses what to play next; --log without --policy "
                         "only reads the log (an adaptive log is read as it stands)")
    refuse_chat_flags(args, "(none)")
    if not args.log.is_file():
        raise ValueError(f"--log {args.log}: no such file")


def _battery(args: argparse.Namespace) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """(battery, episodes per configuration) for args.policy: the default battery, or for an
    sb3 model, whose network has one input and output size, the battery of the shape it was
    trained on (analysis/diagnose/battery.py `battery_for`), every configuration played."""
    from diagym.analysis.diagnose.battery import (
        DEFAULT_BATTERY,
        DEFAULT_SHARES,
        allocate,
        battery_for,
    )

    if not args.policy.startswith("sb3:"):
        return DEFAULT_BATTERY, allocate(DEFAULT_SHARES, args.episode_budget)
    import gymnasium as gym

    from diagym import envs
    from diagym.analysis.cli.policies import trained_env_of
    from diagym.envs.workflow.params import WorkflowParams

    trained_id, kwargs = trained_env_of(args.policy[len("sb3:"):])
    if envs.family_of(trained_id, strict=False) != envs.WORKFLOW:
        raise ValueError(f"--policy {args.policy} was trained on {trained_id}; --env {ENV} "
                         "diagnoses StatefulWorkflow agents")
    spec = WorkflowParams.from_kwargs(**{**gym.spec(trained_id).kwargs, **kwargs})
    design = battery_for(spec.n_ops, spec.candidates, spec.error_allowance)
    if args.episode_budget < len(design.battery):
        raise ValueError(f"--budget {args.episode_budget}: the battery of {args.policy}'s shape "
                         f"has {len(design.battery)} configurations; give at least "
                         f"{len(design.battery)}")
    return design.battery, allocate(design.shares, args.episode_budget, minimum=1)


def _dacs_diagnosis(args: argparse.Namespace) -> dict[str, Any]:
    """The DACS contract of --policy played on the DACS battery (logged with --log), or of the
    DACS log given by --log without --policy."""
    from diagym.analysis.diagnose.dacs import DEFAULT_BATTERY, DEFAULT_EPISODES
    from diagym.analysis.diagnose.run import diagnose_dacs, diagnose_dacs_log
    from diagym.analysis.progress import progress
    from diagym.controllers.runlog import RunLog

    if args.policy is None:
        if args.log is None:
            raise ValueError(f"--env {DACS_ENV} plays the DACS battery; give --policy NAME "
                             "(play it) or --log RUN.jsonl (diagnose a log)")
        _check_log_only(args)
        return diagnose_dacs_log(args.log)
    if args.resume and args.log is None:
        raise ValueError("--resume continues --log FILE.jsonl; give the log to continue")
    configurations = len(DEFAULT_BATTERY)
    budget = (DEFAULT_EPISODES * configurations if args.episode_budget is None
              else args.episode_budget)
    if budget % configurations:
        raise ValueError(f"--budget {budget}: the {DACS_ENV} battery has {configurations} "
                         f"configurations; give a multiple of {configurations}")
    writable_file("--log", args.log)
    RunLog.check_target(args.log, args.resume)
    check_executor_flags(args)
    plan = None
    if args.policy == "llm":  # a local model's whole-run estimate
        from diagym import envs
        from diagym.analysis.cli.estimate import run_plan

        plan = run_plan((budget // configurations, envs.params_of(DACS_ENV, kwargs))
                        for kwargs in DEFAULT_BATTERY)
    with build_policy(args, DACS_ENV, plan=plan) as built, \
            open_executor(args, executor_workers(args, built.chat)) as executor, \
            progress(total=budget, desc="diagym diagnose", unit="episode",
                     initial=_resumed(args, budget), resumed_from=args.log) as bar:
        return diagnose_dacs(built.factory.for_executor(executor),
                             episodes=budget // configurations,
                             seed=args.seed, text_actions=built.text_actions, log=args.log,
                             resume=args.resume, workers=getattr(args, "concurrency", 1),
                             on_record=lambda _record: bar.update(1), executor=executor)


def _print_dacs(result: dict[str, Any]) -> None:
    """The DACS summary (report.summary_lines): the run, the headline, the best reader fit
    and the runner-up, the attribution, the verdicts."""
    from diagym.analysis.diagnose.report import summary_lines

    details = []
    if result["mechanisms"]:
        best, *rest = result["mechanisms"]
        low, high = best["params"]["epsilon_interval"]
        runner_up = (f"; next {rest[0]['name']} at log-LR {rest[0]['log_lr_to_best']:.1f}"
                     if rest else "")
        details.append(f"best reader: {best['name']}"
                       + (f" (plays as {', '.join(best['aliases'])})" if best["aliases"]
                          else "")
                       + f", lapse epsilon {best['epsilon']:.2f} [{low:.2f}, {high:.2f}]"
                       + runner_up)
    details.append("answers: " + ", ".join(f"{key} {count}"
                                           for key, count in result["attribution"].items()))
    counted = (f"{result['episodes']} episodes, {result['decisions']} answers over "
               f"{len(result['configurations'])} configurations")
    for line in summary_lines(result["policy"], result["env"], counted, result["headline"],
                              details, result["verdicts"]):
        print(line)


def _from_inspect_log(args: argparse.Namespace, scratch: Path) -> None:
    """--inspect-log FILE.eval as a run log: written to --log (a new file) or into `scratch`,
    and args.log set to it, so the diagnosis reads it as --log (analysis/integrations)."""
    if args.policy is not None or args.resume or args.adaptive:
        raise ValueError("--inspect-log is diagnosed as it stands; give it without --policy, "
                         "--resume and --adaptive")
    if not args.inspect_log.is_file():
        raise ValueError(f"--inspect-log {args.inspect_log}: no such file")
    try:
        from diagym.analysis.integrations.inspect_eval import run_log_of
    except ImportError as error:
        raise ValueError(f"--inspect-log needs inspect_ai ({error}): pip install "
                         "'diagym[inspect]'") from None
    from diagym.controllers.runlog import RunLog

    if args.log is not None:
        writable_file("--log", args.log)
        RunLog.check_target(args.log, resume=False)
    args.log = args.log or scratch / "inspect.jsonl"
    converted = run_log_of(args.inspect_log, args.log)
    if converted.without_episode or converted.repeated:
        print(f"diagym diagnose: warning: {args.inspect_log}: {converted.episodes} episodes "
              f"read; left out {converted.without_episode} samples without an episode "
              f"(errored or cancelled) and {converted.repeated} repeats of an episode "
              "(further epochs)", file=sys.stderr)


def diagnose(args: argparse.Namespace) -> int:
    if args.inspect_log is None:
        return _diagnose(args)
    with tempfile.TemporaryDirectory(prefix="diagym-diagnose-") as scratch:
        _from_inspect_log(args, Path(scratch))
        return _diagnose(args)


def _diagnose(args: argparse.Namespace) -> int:
    from diagym.analysis.diagnose.report import (
        dacs_to_json,
        summary_lines,
        to_json,
        write,
        write_dacs,
    )
    from diagym.analysis.report import write_beside

    if args.out is not None:
        writable_dir("--out", args.out)
    diagnosis = _diagnosis(args)
    if isinstance(diagnosis, dict):
        if args.out is not None:
            write_dacs(diagnosis, args.out)
            write_beside(args.out, args.log, command="diagnose", quiet=args.json)
        if args.json:
            print(json.dumps(dacs_to_json(diagnosis), indent=2, sort_keys=True),
                  file=args.stdout)
        else:
            _print_dacs(diagnosis)
        return 0
    if args.out is not None:
        write(diagnosis, args.out)
        write_beside(args.out, args.log, command="diagnose", quiet=args.json)
    if args.json:
        print(json.dumps(to_json(diagnosis), indent=2, sort_keys=True), file=args.stdout)
        return 0
    details = []
    if not diagnosis.evidence.nothing_to_fit and len(diagnosis.ranked) > 1:
        runner_up = diagnosis.ranked[1]
        best = diagnosis.ranked[0]
        details.append(f"ranked: {best.mechanism.name}"
                       + (f" (plays as {', '.join(best.aliases)})" if best.aliases else "")
                       + f"; next {runner_up.mechanism.name} at log-LR "
                         f"{runner_up.log_lr_to_best:.1f}")
    counted = f"{diagnosis.episodes} episodes over {len(diagnosis.configurations)} configurations"
    for line in summary_lines(diagnosis.policy, diagnosis.env, counted, diagnosis.headline,
                              details, diagnosis.verdicts):
        print(line)
    for predicted in diagnosis.forecasts:
        low, high = predicted.interval
        print(f"forecast {json.dumps(predicted.kwargs, sort_keys=True)}: success "
              f"{predicted.success:.3f} [{low:.3f}, {high:.3f}]{predicted.note()}")
    return 0
