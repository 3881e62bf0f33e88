"""`diagym llm-study`: seed 003's language-model designs for a chat model."""

from __future__ import annotations

import argparse
import json
from typing import Any

from analysis.cli.common import (
    add_llm_flags,
    add_log_flags,
    bounded_int,
    fail,
    llm_endpoint,
    writable_file,
)
from analysis.studies.llm_study.design import DEFAULT_SEEDS, DESIGNS


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "llm-study",
        help="seed 003's language-model designs (2^5 local factorial, 2^(4-1) fraction)",
        description=(
            "Run a chat model over seed 003's local 2^5 factorial (section 10) or its 2^(4-1) "
            "fractional factorial (section 9.1) and report completed operations, schema-valid "
            "rate, first failures, the median decision latency, the decoding and the marginal "
            "contrasts with seed-cluster bootstrap intervals (Tables 9 and 8)."
        ),
    )
    parser.add_argument("--design", choices=DESIGNS, required=True,
                        help="local (the 2^5 factorial) or fractional (the 2^(4-1) fraction; "
                             "required)")
    parser.add_argument("--seeds", type=bounded_int(1), metavar="K",
                        help="task seeds per cell (default: "
                        + ", ".join(f"{n} {d}" for d, n in DEFAULT_SEEDS.items()) + ")")
    parser.add_argument("--first-seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of each cell's first episode (default: %(default)s)")
    add_log_flags(parser, "calls and episodes", run_flags=True)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the tables (default: off)")
    add_llm_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    import envs  # noqa: F401  (registers the ids)
    from analysis.llm_runs import llm_policy_factory
    from analysis.studies.llm_study.report import answered_calls, format_summary, summarise
    from analysis.studies.llm_study.run import run_design
    from controllers.runlog import RunLog

    n_seeds = args.seeds or DEFAULT_SEEDS[args.design]
    try:
        writable_file("--log", args.log)
        RunLog.check_target(args.log, args.resume)
        # The median decision latency is read from the call lines, so a run without --log
        # still writes one, to a directory that is removed afterwards.
        with tempfile.TemporaryDirectory(prefix="diagym-llm-study-") as scratch, \
                llm_endpoint(args) as settings:
            log = args.log or Path(scratch) / "study.jsonl"
            results = run_design(args.design, args.first_seed, n_seeds,
                                 llm_policy_factory(settings), log=log,
                                 resume=args.resume, workers=args.concurrency, progress=True,
                                 run_name=args.run_name, retry_failed=args.retry_failed)
            calls = answered_calls(log)
    except (ValueError, RuntimeError, OSError) as error:
        return fail("llm-study", error)
    summary = summarise(results, calls=calls, response_format=settings.response_format)
    print(json.dumps(summary, indent=2) if args.json else format_summary(args.design, summary))
    return 0
