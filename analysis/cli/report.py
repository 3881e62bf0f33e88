"""`diagym report`: run logs, study directories and diagnosis JSON as one static HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from diagym.analysis.cli.errors import UsageError
from diagym.analysis.cli.outputs import writable_file


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="one self-contained HTML page of run logs, study outputs and diagnoses",
        description=(
            "Read each INPUT (a run log .jsonl written by run --log, llm-study, dacs-study "
            "or diagnose --log; a study directory written by reproduce, llm-study --out, "
            "dacs-study, rl-study, rcwt sweep or diagnose --out; or a diagnosis.json) and "
            "write one static HTML file that opens from disk with no server or network: "
            "provenance, the headline table with intervals, the structural profile, the "
            "diagnosis verdicts, cost and latency, and a trace viewer of every episode "
            "(paged, filterable by outcome and failure; docs/REPORT.md gives its size bounds)."),
    )
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                        help="a run log (.jsonl), a study directory or a diagnosis JSON")
    parser.add_argument("--out", type=Path, default=Path("report.html"), metavar="FILE.html",
                        help="the HTML file to write; an existing file is replaced only with "
                             "--force, and never when it is one of the INPUTs "
                             "(default: %(default)s)")
    parser.add_argument("--force", action="store_true",
                        help="replace --out when it exists (default: off: refuse)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.report import write_report

    writable_file("--out", args.out)
    for path in args.inputs:
        if not path.exists():
            raise UsageError(f"INPUT {path}: no such file or directory")
        if args.out.exists() and path.samefile(args.out):  # a hard link is the same file
            raise UsageError(f"--out {args.out} is the INPUT {path}: the report would "
                             "replace what it reads; give another --out FILE.html")
    if args.out.exists() and not args.force:
        raise UsageError(f"--out {args.out} exists; pass --force to replace it, or "
                         "another --out FILE.html")
    written = write_report(args.inputs, args.out)
    print(f"report: {written.path} ({written.bytes:,} bytes, {written.episodes:,} episodes)")
    return 0
