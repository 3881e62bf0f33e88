"""One place that decides how diagym compiles its numba kernels.

Kernels are cached on disk so the first `step` of a new process is not a compile. When the
package directory is read-only (a system install, a read-only CI checkout), numba cannot write
its cache beside the source, so the cache moves to a user directory instead of failing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


def _choose_cache_dir() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    if os.access(_PACKAGE_DIR, os.W_OK):
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    target = os.path.join(base, "diagym", "numba")
    try:
        os.makedirs(target, exist_ok=True)
    except OSError:
        target = os.path.join(tempfile.gettempdir(), "diagym-numba-cache")
        os.makedirs(target, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = target


_choose_cache_dir()

import numba  # noqa: E402  (the cache directory must be chosen before numba reads its config)

if os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]


def jit(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile with caching; never `parallel=True` (fork-unsafe under AsyncVectorEnv)."""
    return numba.njit(cache=True, nogil=True)(function)


def jit_inline(function: Callable[..., Any]) -> Callable[..., Any]:
    """As `jit`, and inlined into jitted callers at numba-IR level.

    For the per-env kernels called once per env inside batch loops: a call boundary there
    costs more than a failed step itself (array views are refcounted across it and the loop
    cannot be optimised through it). Python callers still get a compiled function.
    """
    return numba.njit(cache=True, nogil=True, inline="always")(function)
