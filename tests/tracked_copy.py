"""A copy of the checkout as a clone gets it: the tracked files (`git ls-files`) as they are in
the work tree, uncommitted edits included, untracked files (virtual environments, results,
caches) not. Tests that must run the repository's own files from elsewhere start from it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def copy_tracked(destination: Path) -> Path:
    """The checkout's tracked files in `destination`; skips the test outside a git checkout
    (an unpacked archive has no clone to copy)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no clone to copy")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree: a commit of it would not have it
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination
