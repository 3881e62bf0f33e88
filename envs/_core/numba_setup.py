"""One place that decides how diagym compiles its numba kernels, and where their cache lives.

Kernels are cached on disk so the first `step` of a new process is not a compile. numba keys a
cached function on its own source file only, so a kernel that inlines a callee from another
file (every batch loop inlines the transition, the controllers and the streams) would keep
serving stale machine code after that callee changed. The cache therefore lives in a
directory named by a digest of every kernel source file: any edit to any of them selects a
fresh directory, and no stale entry can be read.

The directory is private to the user (mode 0700) under $XDG_CACHE_HOME (default ~/.cache):
a cache directory others can write would let them plant machine code. Where no such directory
can be made, a fresh private temporary directory serves this process only. An explicit
NUMBA_CACHE_DIR is the user's choice and is used as given.

A cold cache means a compile of tens of seconds inside the first `gym.make`; `compiling`
says so (one line before, one after) and stays silent when the kernels load from the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from diagym.envs._core.packages import LAYERS

_PROJECT_DIR = Path(__file__).resolve().parents[2]
_MARKER = "numba_setup"  # every module with kernels imports this one
_KEPT_VERSIONS = 8  # cache directories of other source versions kept (other checkouts)


def kernel_sources(root: Path = _PROJECT_DIR) -> list[Path]:
    """The project's modules that define kernels (those that import this module), sorted."""
    found = []
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            if path.resolve() == Path(__file__).resolve() or _MARKER in path.read_text():
                found.append(path)
    return found


def source_digest(paths: list[Path], root: Path = _PROJECT_DIR) -> str:
    """A digest of the files' relative names and contents: it changes with any edit."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _private_dir(path: Path) -> bool:
    """Make `path` (mode 0700) unless it exists; True if it is a directory only we can write."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError:
        return False
    return path.is_dir() and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _prune(root: Path, keep: Path) -> None:
    """Drop the oldest cache directories of other source versions beyond _KEPT_VERSIONS."""
    others = sorted((p for p in root.iterdir() if p.is_dir() and p != keep),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in others[_KEPT_VERSIONS:]:
        shutil.rmtree(stale, ignore_errors=True)


def _choose_cache_dir() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except (KeyError, RuntimeError):  # no home directory to be found
        base = None
    root = base / "diagym" / "numba" if base is not None else None
    target = root / source_digest(kernel_sources()) if root is not None else None
    if root is not None and target is not None and _private_dir(root) and _private_dir(target):
        _prune(root, target)
    else:
        target = Path(tempfile.mkdtemp(prefix="diagym-numba-"))
    os.environ["NUMBA_CACHE_DIR"] = str(target)


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


LOG = logging.getLogger("diagym")


def _say(message: str) -> None:
    """INFO on the "diagym" logger; also stderr when nobody has configured logging, since
    Python drops INFO records by default and a silent 50 s pause reads as a hang."""
    LOG.info(message)
    if not LOG.hasHandlers():
        print(message, file=sys.stderr, flush=True)


def is_cached(kernel: Any) -> bool | None:
    """Whether numba's disk cache holds a current entry for `kernel` (an index for this numba
    version and this source file's stamp); None when that cannot be read. numba has no public
    call for this, so the private index reader is used and any surprise means "unknown"."""
    try:
        return bool(kernel._cache._cache_file._load_index())
    except Exception:  # any change in numba's internals: unknown, not a crash
        return None


def _compiled(kernel: Any) -> bool:
    """Whether `kernel` compiled rather than loaded from the cache (numba's dispatcher stats)."""
    try:
        return bool(kernel.stats.cache_misses)
    except AttributeError:
        return False


@contextlib.contextmanager
def compiling(what: str, kernels: Sequence[Any]) -> Iterator[None]:
    """Around the first calls of `kernels`: on a cold cache, one line saying that `what`
    kernels compile, then one with the time taken; nothing when every kernel is cached."""
    cold = any(is_cached(kernel) is False for kernel in kernels)
    if cold:
        _say(f"diagym: compiling {what} kernels (first use; cached afterwards) ...")
    start = time.perf_counter()
    yield
    if cold or any(_compiled(kernel) for kernel in kernels):
        _say(f"diagym: compiled {what} kernels in {time.perf_counter() - start:.0f} s "
             f"(cache: {os.environ.get('NUMBA_CACHE_DIR', 'numba default')})")
