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


def _kernel_decorator(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """numba.njit for diagym's kernels, without the runtime's reference counting if possible.

    The kernels never allocate: they index batch arrays that Python owns. With NRT on, every
    call between kernels increfs and decrefs each array argument (atomic operations that LLVM
    cannot remove), which cost 8x the work of a failed step inside the batch loop (measured:
    17 ns vs 2 ns per env). `_nrt=False` is numba's switch for that; should a numba release
    drop it, the kernels still compile, only slower.
    """
    try:
        decorator = numba.njit(cache=True, nogil=True, _nrt=False, **options)

        def _probe(x: int) -> int:
            return x

        numba.njit(nogil=True, _nrt=False)(_probe)(1)
    except (KeyError, TypeError, numba.core.errors.NumbaError):  # pragma: no cover
        decorator = numba.njit(cache=True, nogil=True, **options)
    return decorator


_DECORATOR = _kernel_decorator()
_INLINE_DECORATOR = _kernel_decorator(inline="always")


def jit(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile a kernel: cached, no GIL, never `parallel=True` (fork-unsafe under
    AsyncVectorEnv), no runtime refcounting (kernels must not allocate arrays)."""
    return _DECORATOR(function)


def jit_inline(function: Callable[..., Any]) -> Callable[..., Any]:
    """As `jit`, and inlined at numba-IR level into jitted callers: for the per-env kernels
    called inside batch loops, whose ~40 scalar arguments make a real call cost as much as a
    failed step. Python callers still get a compiled function."""
    return _INLINE_DECORATOR(function)
