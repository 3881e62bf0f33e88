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

from diagym import envs
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
from diagym.analysis.diagnose.contract import DIAGNOSES

ENV, DACS_ENV = (DIAGNOSES[family].env_id for family in (envs.WORKFLOW, envs.DACS))


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
            f"--env {DACS_ENV}, play its battery (analysis/diagnose/dacs/), attribute each "
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
    return ", ".join(f"{f.default_budget} on {f.env_id}" for f in DIAGNOSES.values())


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
    """The diagnosis of --policy played on --env's battery (contract.DIAGNOSES, by its
    family), or of the run log --log."""
    from diagym.analysis.diagnose.contract import family_of
    from diagym.analysis.progress import progress

    family = family_of(args.env)
    if args.adaptive and (family is None or not family.adaptive):
        raise ValueError(f"--adaptive chooses among {_envs('adaptive')}'s battery "
                         f"configurations; --env {args.env} plays its battery in full")
    if family is None:
        raise ValueError(f"--env {args.env}: diagnose plays "
                         f"{' or '.join(f.env_id for f in DIAGNOSES.values())}")
    if args.forecast and not family.forecasts:
        raise ValueError(f"--forecast predicts {_envs('forecasts')} success; --env {args.env} "
                         "has no forecast")
    if args.policy is None:
        if args.log is None:
            raise ValueError(family.no_input)
        _check_log_only(args)
        family = _logged_family(family, args)
        return family.implementation().diagnose_log(args.log, forecasts=args.forecast)
    if args.resume and args.log is None:
        raise ValueError("--resume continues --log FILE.jsonl; give the log to continue")
    implementation = family.implementation()
    trained = None
    if args.policy.startswith("sb3:"):
        from diagym.analysis.cli.policies import trained_env_of

        path = args.policy[len("sb3:"):]

        def trained() -> tuple[str, dict[str, Any]]:
            return trained_env_of(path)

    plan = implementation.plan(args.episode_budget, args.policy, trained, args.adaptive,
                               args.seed)
    from diagym.controllers.runlog import RunLog

    writable_file("--log", args.log)
    RunLog.check_target(args.log, args.resume)
    check_executor_flags(args)
    estimate = None
    if args.policy == "llm":  # a local model's whole-run estimate
        from diagym.analysis.cli.estimate import run_plan

        estimate = run_plan(plan.estimate)
    with build_policy(args, family.env_id, plan=estimate) as built, \
            open_executor(args, executor_workers(args, built.chat)) as executor, \
            progress(total=plan.total, desc="diagym diagnose", unit="episode",
                     initial=_resumed(args, plan.total), resumed_from=args.log) as bar:
        return implementation.diagnose_policy(
            built.factory.for_executor(executor), executor=executor, seed=args.seed,
            log=args.log, resume=args.resume, workers=getattr(args, "concurrency", 1),
            text_actions=built.text_actions, on_record=lambda _record: bar.update(1),
            forecasts=args.forecast, **plan.play)


def _envs(capability: str) -> str:
    """The env ids whose diagnosis has `capability` (a DiagnosisFamily flag)."""
    return " or ".join(f.env_id for f in DIAGNOSES.values() if getattr(f, capability))


def _logged_family(family: Any, args: argparse.Namespace) -> Any:
    """The family whose runs --log holds, read at --env's family: the first other family in
    DIAGNOSES whose runs the log holds when --env's is the first (the default --env), else
    --env's own."""
    first, *others = DIAGNOSES.values()
    if family is not first:
        return family
    for other in others:
        if other.holds_runs(args.log):
            if args.forecast and not other.forecasts:
                raise ValueError(f"--forecast predicts {_envs('forecasts')} success; "
                                 f"{args.log} holds {other.env_id} runs")
            return other
    return family


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
    from diagym.analysis.diagnose.report import summary, to_json, write
    from diagym.analysis.report import write_beside

    if args.out is not None:
        writable_dir("--out", args.out)
    diagnosis = _diagnosis(args)
    if args.out is not None:
        write(diagnosis, args.out)
        write_beside(args.out, args.log, command="diagnose", quiet=args.json)
    if args.json:
        print(json.dumps(to_json(diagnosis), indent=2, sort_keys=True), file=args.stdout)
        return 0
    for line in summary(diagnosis):
        print(line)
    return 0
