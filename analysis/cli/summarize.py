"""`diagym summarize`: the tables and plots of a run log, rebuilt from the log alone."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from diagym.analysis.cli.errors import UsageError
from diagym.analysis.cli.outputs import writable_dir
from diagym.analysis.terminal import shown

SUMMARY_JSON, SUMMARY_TEXT, PROFILE_PNG = "summary.json", "summary.txt", "profile.png"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "summarize",
        help="rebuild a run's tables and plots from its log alone",
        description=(
            "Read LOG.jsonl (any log a diagym command wrote) and print, for each run in it, "
            "the summary diagym run prints (success with its Wilson 95% interval, work, first "
            "failures, and steering or model-call metrics where the run has them). With "
            f"--out DIR, also write {SUMMARY_JSON} (one object per run: run id, settings, the "
            f"diagym run --json summary), {SUMMARY_TEXT} (the printed lines) and "
            f"{PROFILE_PNG} (the headline rate per factor level, Wilson 95% bars; not for a "
            "log of one run, whose rate and interval are in the summary)."),
    )
    parser.add_argument("log", type=Path, metavar="LOG.jsonl", help="the run log to read")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write the summary files there (default: none, print only)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.report.logs import read_run_log
    from diagym.analysis.report.profile import profile

    if not args.log.is_file():
        raise UsageError(f"LOG {args.log}: no such file")
    if args.out is not None:
        writable_dir("--out", args.out)
    log = read_run_log(args.log)
    if not log.runs:
        raise UsageError(f"LOG {args.log}: holds no run (no line with a run's settings)")
    text = "\n\n".join(run.summary_text() for run in log.runs)
    print(text)
    if log.skipped_line():
        print(shown(f"diagym summarize: warning: {log.skipped_line()}"), file=sys.stderr)
    if args.out is None:
        return 0
    summaries = [{"run_id": run.run_id, "run_name": run.name, "run": run.run,
                  "summary": None if run.summary is None else run.summary.to_json()}
                 for run in log.runs]
    (args.out / SUMMARY_JSON).write_text(json.dumps(summaries, indent=2) + "\n")
    (args.out / SUMMARY_TEXT).write_text(text + "\n")
    written = [args.out / SUMMARY_JSON, args.out / SUMMARY_TEXT]
    found = profile(log.runs)
    if found is not None:
        (args.out / PROFILE_PNG).write_bytes(found[1].png)
        written.append(args.out / PROFILE_PNG)
    for path in written:
        print(f"wrote: {path}")
    return 0
