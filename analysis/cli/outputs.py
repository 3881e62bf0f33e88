"""Where a command writes: output paths checked writable before any work starts, and the
--json stream that keeps stdout for the JSON alone."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class OutputError(ValueError):
    """An output path that cannot be written; raised before any work starts."""


def _probe(flag: str, path: Path, directory: Path) -> None:
    """Create and remove a file in `directory`: permission bits say nothing to root, a
    read-only mount or a full quota, so only a real write answers."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".diagym-probe-"):
            pass
    except OSError as error:
        where = "" if directory == path else f" in {directory}"
        raise OutputError(f"{flag} {path}: cannot write{where} ({error.strerror or error})"
                          ) from None


def below_current_directory(path: Path) -> bool:
    """Whether `path` is the current directory or inside it (symlinks resolved)."""
    return Path(path).resolve().is_relative_to(Path.cwd().resolve())


def _existing_ancestor(flag: str, path: Path, directory: Path) -> Path:
    """The nearest existing ancestor of `directory`, the directory `path` is written in,
    where the missing levels may be made: any number below the current directory (`--out
    runs/small` in a fresh clone), elsewhere only `directory` itself, so a typo in a path's
    head (`/nonexistent/...`) is an error, not a tree of directories made anywhere."""
    ancestor = directory
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"{flag} {path}: {ancestor} is a file, not a directory")
    if ancestor in (directory, directory.parent) or below_current_directory(ancestor):
        return ancestor
    raise OutputError(f"{flag} {path}: {directory.parent} does not exist (missing directories "
                      "are created below the current directory; elsewhere only the last one)")


def _make(flag: str, path: Path, directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{flag} {path}: cannot create the directory {directory} "
                          f"({error.strerror or error})") from None


def writable_dir(flag: str, path: Path) -> Path:
    """Check that `path` is, or can become, a directory this process can write, and create
    it (with its missing parents below the current directory; elsewhere its parent must
    exist), so a long command fails in its first second rather than after its work."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{flag} {path}: is a file; {flag} needs a directory")
    if not path.exists():
        _probe(flag, path, _existing_ancestor(flag, path, path))
        _make(flag, path, path)
    _probe(flag, path, path)
    return path


def writable_file(flag: str, path: Path | None) -> Path | None:
    """Check that `path` (None: no file) is a file that can be appended to or created, its
    missing directories allowed as writable_dir allows them; neither is created here, so the
    resume rule still sees whether a log exists."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{flag} {path}: is a directory; {flag} needs a file")
    if path.exists() and not path.is_file():  # /dev/full, a pipe: reading it never ends
        raise OutputError(f"{flag} {path}: is not a regular file; {flag} needs one")
    if path.exists():
        try:
            with path.open("ab"):  # appends nothing: the file is unchanged
                pass
        except OSError as error:
            raise OutputError(f"{flag} {path}: cannot append to the file "
                              f"({error.strerror or error})") from None
        return path
    # The directories are left to the file's writer too (a run refused before its first
    # episode leaves nothing): here only whether they may be made, and written in.
    _probe(flag, path, _existing_ancestor(flag, path, path.parent))
    return path


@contextlib.contextmanager
def json_stdout(wanted: bool) -> Iterator[Any]:
    """The stream a command's --json output goes to, with stdout carrying nothing else:
    while the command runs, file descriptor 1 points at stderr, so what a library prints
    (Ray's notices and its workers' output, forwarded to the driver's stdout) and what a
    child process started meanwhile writes go there; the JSON goes to the real stdout.
    Without --json, stdout as it is."""
    if not wanted:
        yield sys.stdout
        return
    import os

    try:
        on_fd_1 = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        on_fd_1 = False  # sys.stdout replaced (a caller capturing it): the JSON goes there
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        if not on_fd_1:
            yield sys.stdout
            return
        with open(os.dup(kept), "w", encoding="utf-8") as real:
            yield real
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)


def with_json_stdout(command: Callable[[argparse.Namespace], int]
                     ) -> Callable[[argparse.Namespace], int]:
    """`command` run inside `json_stdout(args.json)`, its JSON printed to `args.stdout`."""
    import functools

    @functools.wraps(command)
    def wrapped(args: argparse.Namespace) -> int:
        with json_stdout(args.json) as out:
            args.stdout = JsonStream(out)
            return command(args)

    return wrapped


def _stderr_stream() -> JsonStream:
    return JsonStream(sys.stderr)


class JsonStream:
    """The --json stream on `args`, which factories built from `args` carry to Ray's workers:
    an open file cannot be pickled, so a copy unpickled elsewhere writes to that process's
    stderr (a worker prints no JSON)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _stderr_stream, ()
