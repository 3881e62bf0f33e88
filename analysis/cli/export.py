"""`diagym export`: a run log's failed episodes in a format other tools score (Who&When's
failure-attribution JSON), with the exact labels of a fault-injection run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diagym.analysis.cli.errors import UsageError
from diagym.analysis.cli.outputs import writable_dir

FORMATS = ("who-and-when",)  # diagym.analysis.export.who_and_when.FORMAT


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a run log's failed episodes as Who&When-style attribution JSON",
        description=(
            "Read LOG.jsonl (a StatefulWorkflow run whose episodes have trace lines: diagnose "
            "--log writes them, and so does benchmarks/attribution.py --log) and write each "
            "failed episode to DIR as one Who&When-style JSON file (question, ground_truth, "
            "history of role/name/content turns, mistake_agent, mistake_step, mistake_reason; "
            "docs/EXPORT.md). The mistake_* fields come from the exact labels of a "
            "fault-injection run and are null otherwise."),
    )
    parser.add_argument("log", type=Path, metavar="LOG.jsonl", help="the run log to read")
    parser.add_argument("--format", choices=FORMATS, default=FORMATS[0],
                        help="the output format (default: %(default)s)")
    parser.add_argument("--out", type=Path, metavar="DIR", required=True,
                        help="the directory the files are written to (created if missing)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.export.who_and_when import export

    if not args.log.is_file():
        raise UsageError(f"LOG {args.log}: no such file")
    writable_dir("--out", args.out)
    written = export(args.log, args.out)
    labelled = sum(json.loads(path.read_text())["mistake_step"] is not None for path in written)
    print(f"wrote {len(written)} failed episodes ({labelled} with exact labels) to {args.out}")
    return 0
