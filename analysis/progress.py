"""Progress for long commands, on a terminal and in logs alike.

On a terminal a tqdm bar redraws in place. Elsewhere (a CI log, `2> file`, a pipe) a redrawn
bar is either hidden (tqdm's `disable=None`) or a stream of carriage returns, so there the same
object prints one plain line to stderr at the start, at most every DIAGYM_PROGRESS_INTERVAL
seconds (default 30) while it advances, and at the end.

A resumed command's bar starts at the work its log or checkpoint already holds, announced
first in one line (`resuming_line`), so every command counts resumed work the same way.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, TextIO

from tqdm import tqdm

from diagym.analysis.terminal import shown

INTERVAL_ENV = "DIAGYM_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
LINE_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%), {elapsed} elapsed, " \
              "{remaining} left, {rate_fmt}"
LINE_FORMAT_OPEN = "{desc}: {n_fmt} {unit}, {elapsed} elapsed, {rate_fmt}"  # no total known


def interval() -> float:
    """Seconds between two log lines, from DIAGYM_PROGRESS_INTERVAL; a value that is not a
    positive number is an error naming the variable rather than a silent default."""
    text = os.environ.get(INTERVAL_ENV)
    if text is None or not text.strip():
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{INTERVAL_ENV} must be a positive number of seconds; got {text!r}")
    return value


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class _Lines:
    """The stream a line bar writes to: whole lines pass, the bare "\\n" and "\\r" tqdm
    adds to end or clear a redrawn bar are dropped (they would be blank lines in a log)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if text.strip("\r\n"):
            return self.stream.write(text)
        return 0

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _LineBar(tqdm):
    """tqdm that writes each refresh as its own line instead of redrawing one."""

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        self.fp.write((msg if msg is not None else str(self)) + "\n")
        self.fp.flush()
        return True


def resuming_line(desc: str, done: int, total: int | None, unit: str, where: object,
                  todo: str = "to play") -> str:
    """The line a resumed command prints before its bar: how much of the total `where` (a
    log, a checkpoint directory) already holds, and how much is left."""
    if total is None:
        return f"{desc}: resuming: {done} {unit}s are in {where} already"
    return (f"{desc}: resuming: {done} of {total} {unit}s are in {where} already; "
            f"{total - done} {todo}")


def progress(total: int | None = None, desc: str = "progress", unit: str = "it",
             initial: int = 0, file: TextIO | None = None, resumed_from: object = None,
             todo: str = "to play", **kwargs: Any) -> tqdm:
    """A progress bar (use as tqdm: `update`, `close`, or a `with` block) on stderr: a bar on
    a terminal, periodic one-line updates anywhere else. `initial` is the work already done;
    with `resumed_from` (where it is held) and initial > 0 the `resuming_line` comes first."""
    stream = file if file is not None else sys.stderr
    if resumed_from is not None and initial > 0:
        print(shown(resuming_line(desc, initial, total, unit, resumed_from, todo)),
              file=stream, flush=True)
    if _is_terminal(stream):
        return tqdm(total=total, desc=desc, unit=unit, initial=initial, file=stream, **kwargs)
    every = interval()
    return _LineBar(total=total, desc=desc, unit=unit, initial=initial, file=_Lines(stream),
                    disable=False, ascii=True, mininterval=every, maxinterval=every,
                    miniters=1, dynamic_ncols=False,
                    bar_format=LINE_FORMAT if total is not None else LINE_FORMAT_OPEN,
                    **kwargs)
