"""Seed 003's local factorial, read from the run log `diagym llm-study --design local` wrote,
finished or not.

A factorial of 256 tasks on a local CPU model runs for hours on a shared 2-core machine and is
played across several sittings with `--resume`; its figures are wanted before the last task is
played. This rebuilds the study's results from the log's finished episodes (each cell is the
run `cell_run_name` names) and summarises them with llm-study's own `summarise_study` and
`format_study_summary`, so the figures are the ones `llm-study --out` prints at the end, over
the episodes played so far; the table says how many of the design's tasks that is.

    python benchmarks/local_factorial.py LOG.jsonl [--design local] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym.analysis.studies.llm_study.design import DEFAULT_SEEDS, design_cells  # noqa: E402
from diagym.analysis.studies.llm_study.report import (  # noqa: E402
    format_study_summary,
    summarise_study,
)
from diagym.analysis.studies.llm_study.run import BASELINE, CellRun, cell_run_name  # noqa: E402
from diagym.controllers.episodes import Episodes  # noqa: E402
from diagym.controllers.logreader import answered_calls, read_log  # noqa: E402


def results_from_log(log: Path, design: str, harness: str = BASELINE) -> list[CellRun]:
    """Each cell's finished episodes in the log (task-seed order), as the study's CellRuns;
    a cell with none is left out."""
    by_name = {run.name: run for run in read_log(log).values() if run.name is not None}
    results = []
    for cell in design_cells(design):
        logged = by_name.get(cell_run_name(harness, design, cell))
        if logged is None or not logged.episodes:
            continue
        records = [logged.episodes[seed] for seed in sorted(logged.episodes)]
        results.append(CellRun(harness, cell, Episodes.from_records(records)))
    return results


def decoding_of(calls: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """The run's decoding (constrained or not) and response format, from its call lines."""
    for call in calls:
        return call.get("decoding"), call.get("response_format")
    return None, None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the study's run log")
    parser.add_argument("--design", choices=("local", "fractional"), default="local",
                        help="the design the log plays (default: %(default)s)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    results = results_from_log(args.log, args.design)
    if not results:
        parser.error(f"log {args.log}: no finished episode of a {args.design} design cell")
    planned = len(design_cells(args.design)) * DEFAULT_SEEDS[args.design]
    calls = answered_calls(args.log)
    decoding, response_format = decoding_of(calls)
    summary = summarise_study(results, calls=calls, response_format=response_format)
    played = sum(len(r.episodes) for r in results)
    print(f"{args.log}: {played} of the {planned} planned tasks finished "
          f"({len(results)} of {len(design_cells(args.design))} cells), decoding {decoding}")
    print(format_study_summary(args.design, summary))
    found = {"log": str(args.log), "design": args.design, "planned": planned,
             "finished": played, "decoding": decoding, "summary": summary}
    emit(found, args.json_out)
    return found


if __name__ == "__main__":
    main()
