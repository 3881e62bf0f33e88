"""SIGINT and SIGTERM as one path: a KeyboardInterrupt that unwinds every `finally`.

Python turns SIGINT into KeyboardInterrupt but lets SIGTERM kill the process outright, so a
`kill` skipped the blocks that stop the local llama.cpp server and it was orphaned. Inside
`interruptible()` both signals raise `Interrupted` (a KeyboardInterrupt carrying the signal),
so the same cleanup runs for either, and the command entry turns it into one line and the
shell's status for that signal (128 + its number: 130 for SIGINT, 143 for SIGTERM).

Only the first signal raises: a second one arriving while the first unwinds is recorded and
ignored, because raising inside a cleanup (a server's stop) is what leaves children behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The shell's status for a process stopped by this signal."""
        return 128 + self.signum


_received: list[int] = []  # the signals interruptible() took, this process's last block


def exit_status(error: KeyboardInterrupt) -> int:
    """128 + the signal of an Interrupted; for a plain KeyboardInterrupt, 128 + the signal the
    handler took (a library waiting in native code, such as Ray's, may raise its own
    KeyboardInterrupt in place of ours), else 130 (SIGINT)."""
    taken = _received[0] if _received else signal.SIGINT
    _received.clear()  # read once: a later plain KeyboardInterrupt is no signal of this one
    return error.exit_status if isinstance(error, Interrupted) else 128 + taken


@contextlib.contextmanager
def interruptible(stopping: str | None = None) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted once; the previous handlers are
    restored on exit. Outside the main thread signals cannot be handled, so it does nothing.

    stopping: a line written to stderr the moment the signal arrives, before the unwinding
    (a model call in flight is abandoned, a server stopped), so the user sees at once that
    the signal was taken. It is written with os.write: a signal handler may interrupt a
    print to stderr (a progress line), and a second buffered write there would raise."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False
    _received.clear()

    def handle(signum: int, _frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        _received.append(signum)
        if stopping is not None:
            with contextlib.suppress(OSError):
                os.write(2, f"{stopping} ({signal.Signals(signum).name})\n".encode())
        raise Interrupted(signum)

    previous: dict[int, Any] = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
