"""What produced a result: diagym's version and git commit, and the versions it ran on.

Why: a table without its provenance cannot be checked or repeated, and seed 003 asks the next
study to record model versions with every result. Every run log records this in its first
line of each session (controllers/runlog.py), and the commands' JSON summaries and results
files carry it, so a number can always be traced to the code that made it. It is never part
of a run's identity: upgrading diagym must not orphan a half-finished run, and the sessions
of one run say which code played which part of it.

The commit is read from the checkout the package was imported from (`git rev-parse HEAD`,
bounded to a few seconds); an installed copy outside a checkout reports None, and "dirty" says
whether tracked files differed from that commit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

PACKAGE = "diagym"
LIBRARIES = ("gymnasium", "numpy", "numba", "httpx", "stable-baselines3", "torch", "tiktoken")
GIT_TIMEOUT_S = 5.0
ROOT = Path(__file__).resolve().parents[1]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def provenance() -> dict[str, Any]:
    """diagym's version, git commit (None outside a checkout) and dirty flag, Python and the
    versions of the libraries results depend on; computed once per process."""
    commit = _git("rev-parse", "HEAD") if (ROOT / ".git").exists() else None
    dirty = None
    if commit is not None:
        status = _git("status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    return {
        "diagym_version": _version(PACKAGE),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
    }


PROVENANCE_NAME = "provenance.json"


def write_provenance(directory: Path, run: dict[str, Any]) -> Path:
    """DIR/provenance.json: what a command's output files measure (`run`: the command, its
    settings and seeds) and the code that made them, beside files (CSV tables, plots) whose
    format has no place for it."""
    import json

    path = Path(directory) / PROVENANCE_NAME
    path.write_text(json.dumps({"run": run, **provenance()}, indent=2, default=str) + "\n")
    return path


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hashlib reads it in blocks: model files are large)."""
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
