"""`diagym rl-study`: SB3 agents beside reference controllers, as a structural profile."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from diagym.analysis.cli.errors import UsageError
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    open_executor,
)
from diagym.analysis.cli.flags_general import MAX_COUNT, bounded_int
from diagym.analysis.cli.outputs import with_json_stdout, writable_dir

ARCH_CHOICES = ("mlp", "entity", "entity-lstm")


def arch_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of architectures, each one of ARCH_CHOICES."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [name for name in names if name not in ARCH_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of "
                                         f"{' | '.join(ARCH_CHOICES)}; got {text!r}")
    return names


def int_list(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers >= 1, kept in the order given."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of integers >= 1; "
                                         f"got {text!r}")
    return values


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rl-study",
        help="SB3 agents per architecture on snapshot/history x width, profiled",
        description=(
            "Train MaskablePPO (memoryless) and RecurrentPPO (LSTM) on a small StatefulWorkflow "
            "preset under snapshot and history feedback at widths 1 and 8, evaluate them and "
            "reference controllers on held-out seeds, and write a table and a profile plot. "
            "--arch adds the structured networks (docs/RL.md), --full plays the default N at "
            "widths 1/4/8 and candidates 2/4, --seeds trains several seeds per agent (with a "
            "band over seeds) and --diagnose profiles every trained agent on the diagnosis "
            "battery of its shape. --capacity W1,W2,.. runs the capacity study instead: "
            "one memory architecture (--arch entity-lstm or mlp, RecurrentPPO) at these LSTM "
            "widths on the history preset, each seed diagnosed at every --checkpoints step "
            "count, with the Spearman rho of fitted retention on width (docs/RL.md)."
        ),
    )
    parser.add_argument("--arch", type=arch_list, default=("mlp",), metavar="LIST",
                        help="comma-separated architectures: mlp (MaskablePPO and "
                             "RecurrentPPO), entity (MaskablePPO), entity-lstm (RecurrentPPO) "
                             "(default: mlp)")
    parser.add_argument("--seeds", type=bounded_int(1, 32), default=1, metavar="K",
                        help="training seeds per agent, from --seed (default: %(default)s)")
    parser.add_argument("--full", action="store_true",
                        help="the default N=8 (depth 4) at widths 1, 4, 8 and candidates 2, 4 "
                             "instead of the small preset (default: off)")
    parser.add_argument("--diagnose", action="store_true",
                        help="diagnose every trained agent on the battery of its shape and put "
                             "the verdicts in the table (default: off)")
    parser.add_argument("--capacity", type=int_list, default=None, metavar="WIDTHS",
                        help="run the capacity study at these LSTM hidden widths, e.g. "
                             "4,16,64, resumable in --out (default: off, the grid study)")
    parser.add_argument("--checkpoints", type=int_list, default=None, metavar="STEPS",
                        help="with --capacity, the increasing step counts each run is "
                             "diagnosed at (default: --steps/4, --steps/2, --steps)")
    parser.add_argument("--steps", type=bounded_int(1, MAX_COUNT), default=100_000, metavar="N",
                        help="training steps per agent (default: %(default)s)")
    parser.add_argument("--episodes", type=bounded_int(1, MAX_COUNT), default=256, metavar="E",
                        help="held-out evaluation episodes per policy (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="training seed (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("results/rl"), metavar="DIR",
                        help="where the models, the table and the plot go (default: "
                             "%(default)s)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON rows instead of the table (default: off)")
    add_executor_flags(parser)
    parser.set_defaults(func=with_json_stdout(run))


def run(args: argparse.Namespace) -> int:
    import diagym  # noqa: F401  (registers the ids)
    from diagym.analysis.studies.rl_study.report import format_rows, write_report
    from diagym.analysis.studies.rl_study.run import train_and_evaluate

    writable_dir("--out", args.out)
    check_executor_flags(args)
    if args.capacity is not None or args.checkpoints is not None:
        return run_capacity_study(args)
    if args.executor == "local":
        rows = train_and_evaluate(args.out, steps=args.steps, episodes=args.episodes,
                         seed=args.seed, progress=True, archs=args.arch, seeds=args.seeds,
                         full=args.full, diagnose=args.diagnose)
    else:
        with open_executor(args) as executor:
            rows = train_and_evaluate(args.out, steps=args.steps, episodes=args.episodes,
                             seed=args.seed, archs=args.arch, seeds=args.seeds,
                             full=args.full, diagnose=args.diagnose, executor=executor)
    table, plot = write_report(rows, args.out)
    from diagym.analysis.report import write_beside

    write_beside(args.out, command="rl-study", quiet=args.json)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2), file=args.stdout)
    else:
        print(format_rows(rows))
        print(f"table: {table}\nplot: {plot}")
    return 0


def run_capacity_study(args: argparse.Namespace) -> int:
    """`rl-study --capacity`: analysis/studies/rl_study/capacity.py, its table printed and
    written to DIR/capacity.md (and its tables as data, DIR/capacity.tables.json)."""
    from diagym.analysis.studies.rl_study.capacity import CapacityDesign, run_capacity
    from diagym.analysis.studies.rl_study.capacity_report import (
        TABLE_NAME,
        format_table,
        lapse_rho,
        retention_rho,
        write_table,
    )

    if args.capacity is None:
        raise UsageError("--checkpoints: needs --capacity WIDTHS")
    if len(args.arch) != 1:
        raise UsageError(f"--arch: the capacity study takes one architecture; got "
                         f"{','.join(args.arch)}")
    steps = args.steps
    checkpoints = args.checkpoints or tuple(sorted({max(1, steps // 4),
                                                    max(1, steps // 2), steps}))
    design = CapacityDesign(arch=args.arch[0], widths=args.capacity,
                            seeds=tuple(range(args.seed, args.seed + args.seeds)),
                            checkpoints=checkpoints, episodes=args.episodes)
    rows = run_capacity(design, args.out)
    table = format_table(rows)
    write_table(rows, args.out)
    if args.json:
        print(json.dumps({"rows": [dataclasses.asdict(r) for r in rows],
                          "retention_rho": _finite(retention_rho(rows)),
                          "lapse_rho": _finite(lapse_rho(rows))}, indent=2))
    else:
        print(table)
        print(f"table: {args.out / TABLE_NAME}")
    return 0


def _finite(rho: Any) -> dict[str, Any]:
    """A Rho as JSON fields, an undefined rho (nan) as null."""
    fields = dataclasses.asdict(rho)
    return {k: None if isinstance(v, float) and v != v else v for k, v in fields.items()}
