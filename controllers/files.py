"""Writing a file so that no reader, kill or full disk ever leaves a torn one: the bytes go to
a temporary file beside it, are flushed to disk, and replace the file in one rename. A write
that fails removes its temporary file and leaves the old file as it was."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """write(binary handle) to a temporary file in path's directory, fsync, then os.replace
    it onto `path`; on any error the temporary file is removed and the error raised."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
