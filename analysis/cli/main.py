"""The `diagym` command line: one entry point for the paper's analyses.

Each subcommand is a pair of functions, `_add_<name>_parser` to declare its flags and
`_cmd_<name>` to run it, registered in SUBCOMMANDS; adding `run` or `reproduce` later means
adding one more pair without touching the others. Flags are validated by argparse itself, so a
bad value exits with status 2 and a message naming the flag and what is allowed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from envs.workflow.params import MAX_OPS

AUDIT_KEYS = ("family", "depth", "edges", "masks", "orders", "ready_nodes")
AUDIT_HEADERS = ("family", "depth", "edges", "masks", "orders", "ready nodes")


def _bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type for integers in low..high (high None: no upper bound), so a bad
    flag fails before any env is built, with a message saying what is allowed."""
    allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {value}")
        return value

    return parse


# -- audit ---------------------------------------------------------------------------------
def _add_audit_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="exact structural audit of the prerequisite graphs (paper Table 1)",
        description=(
            "Enumerate edges, reachable completion sets, valid orders and mean ready "
            "operations of the seed-0 task for both graph families and every depth dividing "
            "--n-ops."
        ),
    )
    parser.add_argument(
        "--n-ops",
        type=_bounded_int(1, MAX_OPS),
        required=True,
        metavar="N",
        help=f"number of operations, 1..{MAX_OPS}",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.set_defaults(func=_cmd_audit)


def format_audit_table(rows: list[dict[str, Any]]) -> str:
    """Right-aligned columns (family left-aligned), ready nodes to two decimals."""
    cells = [
        [
            str(r["family"]),
            str(r["depth"]),
            str(r["edges"]),
            str(r["masks"]),
            str(r["orders"]),
            f"{r['ready_nodes']:.2f}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(AUDIT_HEADERS)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    return "\n".join([line(AUDIT_HEADERS), *(line(c) for c in cells)])


def _cmd_audit(args: argparse.Namespace) -> int:
    from analysis.audit import audit_table  # deferred: only this subcommand needs the env

    rows = [{key: row[key] for key in AUDIT_KEYS} for row in audit_table(args.n_ops)]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_audit_table(rows))
    return 0


# -- run -----------------------------------------------------------------------------------
def _env_kwargs(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r}")
    return value


def _log_needs_resume(command: str, args: argparse.Namespace) -> bool:
    """True (after saying so) when --log names an existing log and --resume was not given:
    appending a second run to it would mix two runs' episodes."""
    if args.log is not None and args.log.exists() and not args.resume:
        print(f"diagym {command}: error: log {args.log} exists: pass --resume to continue it, "
              f"or choose another file", file=sys.stderr)
        return True
    return False


def _policy_name(text: str) -> str:
    """argparse type for --policy: a programmed policy, llm, or sb3:PATH."""
    from controllers.registry import POLICY_NAMES

    if text in POLICY_NAMES or text == "llm" or text.startswith("sb3:"):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(POLICY_NAMES)}, llm or sb3:DIR/model.zip; got {text!r}")


def _add_run_parser(subparsers: Any) -> None:
    from controllers.registry import POLICY_NAMES

    parser = subparsers.add_parser(
        "run",
        help="run a policy on a registered env and summarise its episodes",
        description=(
            "Play --episodes episodes of --env with --policy through the Gymnasium API "
            "(episode i on seed S + i) and print success with its Wilson 95%% interval, mean "
            "completed operations, mean calls and first-failure counts."
        ),
    )
    parser.add_argument("--env", required=True, metavar="ID", help="a registered env id")
    parser.add_argument("--env-kwargs", type=_env_kwargs, default={}, metavar="JSON",
                        help="keyword arguments for gym.make, as a JSON object")
    parser.add_argument("--policy", required=True, type=_policy_name, metavar="NAME",
                        help="a programmed policy (" + ", ".join(POLICY_NAMES)
                        + "), llm (a chat model behind --base-url) or sb3:DIR/model.zip "
                        "(a model saved by diagym train)")
    parser.add_argument("--episodes", type=_bounded_int(1), required=True, metavar="K")
    parser.add_argument("--seed", type=_bounded_int(0), default=0, metavar="S")
    parser.add_argument("--log", type=Path, metavar="FILE.jsonl",
                        help="append-only run log: one line per episode (and per model call)")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    _add_llm_flags(parser)
    parser.set_defaults(func=_cmd_run)


def _add_llm_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of a chat model policy (--policy llm, llm-study)."""
    group = parser.add_argument_group("chat model (--policy llm)")
    group.add_argument("--base-url", metavar="URL",
                       help="OpenAI-compatible API root ending in /v1, e.g. "
                            "http://127.0.0.1:8080/v1 (llama.cpp, vLLM, Ollama, OpenAI)")
    group.add_argument("--local", action="store_true",
                       help="start the bundled Gemma 3 270M llama.cpp server and use it")
    group.add_argument("--model", metavar="NAME", help="model name sent to the server")
    group.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                       help="environment variable holding the API key (never logged)")
    group.add_argument("--concurrency", type=_bounded_int(1), default=1, metavar="K",
                       help="episodes in flight at once")
    group.add_argument("--budget", type=_bounded_int(1), metavar="W",
                       help="assemble every prompt to exactly W cl100k_base tokens (RCWT)")
    group.add_argument("--max-tokens", type=_bounded_int(1), default=64, metavar="T")
    group.add_argument("--temperature", type=float, default=0.0)
    group.add_argument("--llm-seed", type=_bounded_int(0), metavar="S",
                       help="sampling seed sent to the server")
    group.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS")
    group.add_argument("--response-format", default="auto",
                       choices=("auto", "json_schema", "json_object", "none"))
    group.add_argument("--no-system-role", action="store_true",
                       help="put the rules in the user turn (chat formats without a system role)")


@contextlib.contextmanager
def _llm_endpoint(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Client settings from the flags; with --local, around a running local server."""
    if args.local:
        from llm_policies.client import local_server

        with local_server.local_server() as base_url:
            yield {"base_url": base_url, "model": args.model or "gemma-3-270m",
                   "response_format": local_server.RESPONSE_FORMAT,
                   "system_role": local_server.SYSTEM_ROLE}
        return
    if not args.base_url or not args.model:
        raise ValueError("--policy llm needs --base-url URL and --model NAME (or --local)")
    yield {"base_url": args.base_url, "model": args.model,
           "response_format": args.response_format, "system_role": not args.no_system_role}


def _llm_factories(args: argparse.Namespace, endpoint: dict[str, Any], env_id: str | None,
                   env_kwargs: dict[str, Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(make_env, make_policy) for the runner: every worker its own env, client and policy."""
    import gymnasium as gym

    from llm_policies.client.transport import ChatClient
    from llm_policies.policy import LLMPolicy, renderer_for
    from llm_policies.text_actions import TextActionWrapper

    def make_env(spec: Any = None) -> Any:
        if spec is not None:
            return TextActionWrapper(gym.make("StatefulWorkflow-v0", **dataclasses.asdict(spec)))
        return TextActionWrapper(gym.make(env_id, **env_kwargs))

    def make_policy(env: Any) -> Any:
        renderer = renderer_for(env, budget=args.budget, system_role=endpoint["system_role"])
        client = ChatClient(
            base_url=endpoint["base_url"], model=endpoint["model"],
            api_key_env=args.api_key_env, timeout=args.timeout, temperature=args.temperature,
            max_tokens=args.max_tokens, seed=args.llm_seed,
            response_format=endpoint["response_format"], json_schema=renderer.schema)
        return LLMPolicy(client, renderer)

    return make_env, make_policy


def summarise_records(records: list[Any]) -> dict[str, Any]:
    """The `diagym run --json` object: rates over episodes, first failures by category."""
    from analysis.stats import wilson_interval

    episodes = len(records)
    wins = sum(r.success for r in records)
    low, high = wilson_interval(wins, episodes)
    failures: dict[str, int] = {}
    for r in records:
        if r.first_failure is not None:
            failures[r.first_failure] = failures.get(r.first_failure, 0) + 1
    summary: dict[str, Any] = {
        "episodes": episodes,
        "success": wins / episodes,
        "success_ci": [float(low), float(high)],
        "mean_completed": sum(r.completed for r in records) / episodes,
        "mean_calls": sum(r.calls for r in records) / episodes,
        "failures": dict(sorted(failures.items())),
    }
    metrics = [r.metrics for r in records if r.metrics]
    if metrics and len(metrics) == episodes:  # DACSSteering: per-decision steering metrics
        import numpy as np

        tokens = np.concatenate([np.asarray(m["window_tokens"], dtype=float) for m in metrics])
        decisions = [len(m["window_tokens"]) for m in metrics]
        summary["accuracy"] = float(np.average([m["accuracy"] for m in metrics],
                                               weights=decisions))
        summary["contamination"] = float(np.average([m["contamination"] for m in metrics],
                                                    weights=decisions))
        summary["mean_tokens"] = float(tokens.mean())
        summary["p95_tokens"] = float(np.percentile(tokens, 95))
    return summary


def _cmd_run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)
    from controllers.registry import make_reference_policy
    from controllers.rollout import rollout, rollout_parallel

    if _log_needs_resume("run", args):
        return 2
    try:
        if args.policy == "llm":
            from tqdm import tqdm

            with _llm_endpoint(args) as endpoint:
                make_env, make_policy = _llm_factories(args, endpoint, args.env,
                                                       args.env_kwargs)
                make_policy(make_env())  # fail early on a bad env or spec
                with tqdm(total=args.episodes, unit="episode", disable=None) as bar:
                    records = rollout_parallel(
                        make_env, make_policy, args.episodes, seed=args.seed,
                        workers=args.concurrency, log=args.log, resume=args.resume,
                        on_record=lambda _record: bar.update(1))
        else:
            env = gym.make(args.env, **args.env_kwargs)
            if args.policy.startswith("sb3:"):
                from controllers.sb3.policy import SB3Policy

                policy = SB3Policy.load(args.policy[len("sb3:"):])
            else:
                policy = make_reference_policy(args.policy, env)
            records = rollout(env, policy, args.episodes, seed=args.seed, log=args.log,
                              resume=args.resume)
    except (gym.error.Error, ValueError, TypeError, RuntimeError, OSError) as error:
        print(f"diagym run: error: {error}", file=sys.stderr)
        return 2
    summary = summarise_records(records)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    low, high = summary["success_ci"]
    print(f"{args.policy} on {args.env} {json.dumps(args.env_kwargs)}: "
          f"{summary['episodes']} episodes from seed {args.seed}")
    print(f"success         {100 * summary['success']:.2f}%  "
          f"(Wilson 95% [{100 * low:.2f}, {100 * high:.2f}])")
    print(f"mean completed  {summary['mean_completed']:.2f}")
    print(f"mean calls      {summary['mean_calls']:.2f}")
    failures = ", ".join(f"{k} {v}" for k, v in summary["failures"].items()) or "none"
    print(f"first failures  {failures}")
    if "accuracy" in summary:
        print(f"accuracy        {summary['accuracy']:.3f}   contamination "
              f"{summary['contamination']:.3f}   window tokens mean {summary['mean_tokens']:.0f}"
              f", p95 {summary['p95_tokens']:.0f}")
    return 0


# -- reproduce -----------------------------------------------------------------------------
GRID_CHOICES = ("primary", "work", "memory", "observation", "recovery", "locality", "selection",
                "labels", "all")


def _add_reproduce_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="run seed 003's primary factorial and follow-on grids; write results and tables",
        description=(
            "Run the reference controllers over a grid (all: 689,152 episodes) and write "
            "DIR/results.csv (one row per configuration), DIR/tables.md (the shapes of the "
            "paper's Tables 1, 3-6 and C.1-C.7) and PNG profile plots."
        ),
    )
    parser.add_argument("--grid", choices=GRID_CHOICES, default="all",
                        help="which grid to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="output directory (default: results)")
    parser.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from analysis.studies.reproduce.run import reproduce

    result = reproduce(args.grid, args.out, progress=sys.stderr.isatty())
    total = sum(result.seconds.values())
    stages = ", ".join(f"{name} {value:.2f} s" for name, value in result.seconds.items())
    print(f"{result.configurations:,} configurations, {result.episodes:,} episodes in "
          f"{total:.2f} s ({stages})")
    print(f"results: {result.results_csv}")
    print(f"tables:  {result.tables_md}")
    print(f"plots:   {len(result.plots)} PNG files in {args.out}")
    return 0


# -- llm-study ------------------------------------------------------------------------------
def _add_llm_study_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "llm-study",
        help="seed 003's language-model designs (2^5 local factorial, 2^(4-1) fraction)",
        description=(
            "Run a chat model over seed 003's local 2^5 factorial (section 10) or its 2^(4-1) "
            "fractional factorial (section 9.1) and report completed operations, schema-valid "
            "rate, first failures, latency and the marginal contrasts with seed-cluster "
            "bootstrap intervals (Tables 9 and 8)."
        ),
    )
    parser.add_argument("--design", choices=("local", "fractional"), required=True)
    parser.add_argument("--seeds", type=_bounded_int(1), metavar="K",
                        help="task seeds per cell (default: 8 local, 2 fractional)")
    parser.add_argument("--first-seed", type=_bounded_int(0), default=0, metavar="S")
    parser.add_argument("--log", type=Path, metavar="FILE.jsonl",
                        help="append-only run log (calls and episodes)")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    _add_llm_flags(parser)
    parser.set_defaults(func=_cmd_llm_study)


def _cmd_llm_study(args: argparse.Namespace) -> int:
    import envs  # noqa: F401
    from analysis.studies.llm_study.run import format_summary, run_design, summarise

    if _log_needs_resume("llm-study", args):
        return 2
    n_seeds = args.seeds or (8 if args.design == "local" else 2)
    try:
        with _llm_endpoint(args) as endpoint:
            make_env, make_policy = _llm_factories(args, endpoint, None, {})
            results = run_design(args.design, args.first_seed, n_seeds, make_env, make_policy,
                                 log=args.log, workers=args.concurrency, progress=True)
    except (ValueError, RuntimeError) as error:
        print(f"diagym llm-study: error: {error}", file=sys.stderr)
        return 2
    summary = summarise(results)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(args.design, summary))
    return 0


# -- dacs-study -----------------------------------------------------------------------------
def _add_dacs_study_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dacs-study",
        help="seed 002's phases on DACSSteering-v0: accuracy, contamination, tokens",
        description=(
            "Run seed 002's phases (N in {3, 5, 10}; homogeneous, crossfire, cascade; D up to "
            "15) on DACSSteering-v0 with the reference orchestrators (dacs-reader on dacs "
            "windows, flat-reader and flat-recency on flat windows, registry-only, uniform) "
            "or with --policy llm on dacs and flat windows; print a table and write plots."
        ),
    )
    parser.add_argument("--policy", choices=("reference", "llm"), default="reference")
    parser.add_argument("--episodes", type=_bounded_int(1), default=10, metavar="K",
                        help="scenario seeds per arm (default 10, as seed 002's trials)")
    parser.add_argument("--window", type=_bounded_int(64), default=4096, metavar="W")
    parser.add_argument("--phases", nargs="+", choices=("agents", "diversity", "density"),
                        default=["agents", "diversity", "density"])
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="where the plots go (default: results)")
    parser.add_argument("--log", type=Path, metavar="FILE.jsonl",
                        help="append-only run log (episodes, and model calls with --policy llm)")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead")
    _add_llm_flags(parser)
    parser.set_defaults(func=_cmd_dacs_study)


def _cmd_dacs_study(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import envs  # noqa: F401
    from analysis.studies.dacs_study.run import REFERENCE_ARMS, format_table, plot_study, run_study
    from controllers.registry import make_reference_policy

    if _log_needs_resume("dacs-study", args):
        return 2
    try:
        with contextlib.ExitStack() as stack:
            if args.policy == "llm":
                endpoint = stack.enter_context(_llm_endpoint(args))
                make_llm_env, make_llm_policy = _llm_factories(args, endpoint,
                                                               "DACSSteering-v0", {})
                from llm_policies.text_actions import TextActionWrapper

                def make_env(kwargs: dict[str, Any]) -> Any:
                    return TextActionWrapper(gym.make("DACSSteering-v0", **kwargs))

                def make_policy(_name: str, env: Any) -> Any:
                    return make_llm_policy(env)

                arms: tuple[tuple[str, str], ...] = (("llm", "dacs"), ("llm", "flat"))
            else:
                def make_env(kwargs: dict[str, Any]) -> Any:
                    return gym.make("DACSSteering-v0", **kwargs)

                make_policy = make_reference_policy
                arms = REFERENCE_ARMS
            results = run_study(make_env, make_policy, arms=arms, episodes=args.episodes,
                                window=args.window, phases=tuple(args.phases), progress=True,
                                log=args.log, workers=args.concurrency)
    except (ValueError, RuntimeError) as error:
        print(f"diagym dacs-study: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
        return 0
    print(format_table(results, args.window))
    for path in plot_study(results, args.out):
        print(f"plot: {path}")
    return 0


# -- train ----------------------------------------------------------------------------------
def _add_train_parser(subparsers: Any) -> None:
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
                        required=True)
    parser.add_argument("--env", required=True, metavar="ID")
    parser.add_argument("--env-kwargs", type=_env_kwargs, default={}, metavar="JSON")
    parser.add_argument("--steps", type=_bounded_int(1), required=True, metavar="N")
    parser.add_argument("--n-envs", type=_bounded_int(1), default=8, metavar="K")
    parser.add_argument("--seed", type=_bounded_int(0), default=0, metavar="S")
    parser.add_argument("--eval-episodes", type=_bounded_int(1), default=64, metavar="E")
    parser.add_argument("--multi-discrete", action="store_true",
                        help="independent (operation, candidate) heads instead of the joint "
                             "Discrete(N*b) action")
    parser.add_argument("--raw-obs", action="store_true",
                        help="raw integer observations instead of one-hot")
    parser.add_argument("--hyperparameters", type=_env_kwargs, default={}, metavar="JSON",
                        help="algorithm keyword arguments over the defaults, e.g. "
                             "'{\"n_epochs\": 4, \"batch_size\": 512}'")
    parser.add_argument("--eval-every", type=_bounded_int(0), default=0, metavar="STEPS",
                        help="steps between held-out evaluations (0: about 20 in all)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in DIR up to --steps (same settings "
                             "otherwise; curve rows are kept); without a model in DIR, start "
                             "afresh. Without --resume a DIR holding a run is refused")
    parser.set_defaults(func=_cmd_train)


def _cmd_train(args: argparse.Namespace) -> int:
    import envs  # noqa: F401
    from analysis.training import TrainConfig, read_curve, train

    config = TrainConfig(algo=args.algo, env=args.env, env_kwargs=args.env_kwargs,
                         steps=args.steps, n_envs=args.n_envs, seed=args.seed,
                         joint_actions=not args.multi_discrete, one_hot=not args.raw_obs,
                         eval_episodes=args.eval_episodes, eval_every=args.eval_every,
                         hyperparameters=args.hyperparameters)
    try:
        model = train(config, args.out, progress=True, resume=args.resume)
    except (ValueError, TypeError) as error:
        print(f"diagym train: error: {error}", file=sys.stderr)
        return 2
    last = read_curve(args.out / "curve.csv")[-1]
    print(f"{args.algo} on {args.env}: {int(last['steps']):,} steps in {last['wall_s']:.0f} s; "
          f"held-out success {100 * last['success']:.1f}%")
    print(f"model: {model}\ncurve: {args.out / 'curve.csv'} and {args.out / 'curve.png'}")
    return 0


# -- rl-study -------------------------------------------------------------------------------
def _add_rl_study_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rl-study",
        help="MaskablePPO and RecurrentPPO on snapshot/history x width 1/8, profiled",
        description=(
            "Train MaskablePPO (memoryless) and RecurrentPPO (LSTM) on a small StatefulWorkflow "
            "preset under snapshot and history feedback at widths 1 and 8, evaluate them and "
            "reference controllers on held-out seeds, and write a table and a profile plot."
        ),
    )
    parser.add_argument("--steps", type=_bounded_int(1), default=100_000, metavar="N")
    parser.add_argument("--episodes", type=_bounded_int(1), default=256, metavar="E")
    parser.add_argument("--seed", type=_bounded_int(0), default=0, metavar="S")
    parser.add_argument("--out", type=Path, default=Path("results/rl"), metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead")
    parser.set_defaults(func=_cmd_rl_study)


def _cmd_rl_study(args: argparse.Namespace) -> int:
    import envs  # noqa: F401
    from analysis.studies.rl_study.run import format_rows, plot_rows, run_study

    rows = run_study(args.out, steps=args.steps, episodes=args.episodes, seed=args.seed,
                     progress=True)
    table = format_rows(rows)
    (args.out / "rl_study.md").write_text(table + "\n")
    plot = plot_rows(rows, args.out / "rl_profile.png")
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        print(table)
        print(f"plot: {plot}")
    return 0


# -- serve-local ----------------------------------------------------------------------------
def _add_serve_local_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve-local",
        help="serve the bundled Gemma 3 270M model on 127.0.0.1 (OpenAI-compatible)",
        description=(
            "Start llama.cpp's OpenAI-compatible server with Gemma 3 270M Q4_K_M (the "
            "[local-llm] extra) on 127.0.0.1 until Ctrl-C, then stop it cleanly."
        ),
    )
    parser.add_argument("--port", type=_bounded_int(0, 65535), default=8080, metavar="P")
    parser.set_defaults(func=_cmd_serve_local)


def _cmd_serve_local(args: argparse.Namespace) -> int:
    import signal
    import threading

    from llm_policies.client import local_server

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with local_server.local_server(port=args.port) as base_url:
            print(f"serving Gemma 3 270M at {base_url} (chat format gemma: no system role; "
                  f"response_format json_object); Ctrl-C stops it", flush=True)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    except RuntimeError as error:
        print(f"diagym serve-local: error: {error}", file=sys.stderr)
        return 2
    print("server stopped")
    return 0


# -- rcwt -----------------------------------------------------------------------------------
def _add_rcwt_parser(subparsers: Any) -> None:
    from analysis.cli.rcwt import add_rcwt_parser  # its module builds on this one

    add_rcwt_parser(subparsers)


# -- entry point ---------------------------------------------------------------------------
SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_audit_parser, _add_run_parser, _add_reproduce_parser, _add_llm_study_parser,
    _add_dacs_study_parser, _add_train_parser, _add_rl_study_parser, _add_serve_local_parser,
    _add_rcwt_parser,
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    parser = argparse.ArgumentParser(
        prog="diagym",
        description=("diagym: Gymnasium environments, policies and analyses for diagnosing "
                     "agents that act through tools and text (StatefulWorkflow, seed 003; "
                     "DACSSteering, seed 002; RCWT budgets, seed 000)."),
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse argv (default sys.argv[1:]), run the chosen subcommand, return its exit status."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    raise SystemExit(main())
