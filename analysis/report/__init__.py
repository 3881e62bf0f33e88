"""`diagym report`'s library: any run log, study directory or diagnosis JSON as one static,
self-contained HTML file (docs/REPORT.md).

inputs.py reads the inputs into one Report (model.py); html.py draws it, opening with a
diagnosis's verdict from verdict.py, with the trace viewer's episodes from episodes.py and the
structural profile (like with like) from profile.py. The commands
that write outputs call `write_beside` once at the end, so every output directory carries its
report; a report that cannot be built never fails the command's own output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from diagym.analysis.report.html import render
from diagym.analysis.report.inputs import REPORT_NAME, build
from diagym.analysis.terminal import shown
from diagym.controllers.files import write_atomically


@dataclass(frozen=True)
class Written:
    path: Path
    bytes: int
    episodes: int


def write_report(inputs: Iterable[Path], out: Path) -> Written:
    """Build the report of `inputs` and write it to `out`."""
    report = build(inputs)
    text = render(report)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # the CLI checked where first
    data = text.encode("utf-8")
    write_atomically(out, lambda handle: handle.write(data))  # --force keeps the old page
    return Written(out, len(data), report.episodes)


def write_beside(directory: Path, *extra: Path | None, command: str = "report",
                 quiet: bool = False) -> Path | None:
    """DIRECTORY/report.html from the directory's outputs and the `extra` inputs (a run log
    written elsewhere, None for none), announced in one line on stdout unless `quiet` (a
    command printing JSON); None, after one warning line on stderr, when it cannot be built,
    so a command's main output never fails on its report."""
    inputs = [Path(directory), *(Path(p) for p in extra if p is not None)]
    try:
        written = write_report(inputs, Path(directory) / REPORT_NAME)
    except Exception as error:  # noqa: BLE001  (the report is a by-product: any failure warns)
        print(shown(f"diagym {command}: warning: no {REPORT_NAME} "
                    f"({type(error).__name__}: {error})"), file=sys.stderr)
        return None
    if not quiet:
        print(f"report: {written.path}")
    return written.path


def report_hint(log: Path) -> str:
    """The one line `diagym run --log` prints about its report."""
    return f"report: diagym report {log} --out report.html makes one HTML page of this run"
