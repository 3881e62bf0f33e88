"""Where compiled kernels are cached: a private directory named by the kernel sources' digest,
so an edit to any kernel file (callees included) never serves stale machine code."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from diagym.envs._core import numba_setup


def test_the_cache_is_private_and_named_by_the_kernel_sources(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    numba_setup._choose_cache_dir()
    digest = numba_setup.source_digest(numba_setup.kernel_sources())
    target = tmp_path / "diagym" / "numba" / digest
    assert os.environ["NUMBA_CACHE_DIR"] == str(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_every_module_with_kernels_is_in_the_digest() -> None:
    names = {p.relative_to(numba_setup._PROJECT_DIR).as_posix()
             for p in numba_setup.kernel_sources()}
    for module in ("envs/workflow/kernel.py", "envs/_core/rng.py", "envs/_core/numba_setup.py",
                   "controllers/workflow/mechanisms.py", "controllers/workflow/batched.py"):
        assert module in names
    assert "controllers/rollout.py" not in names  # no kernels: its edits keep the cache


def test_an_edit_to_any_source_changes_the_digest(tmp_path: Path) -> None:
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    for path in files:
        path.write_text("x = 1\n")
    before = numba_setup.source_digest(files, tmp_path)
    files[1].write_text("x = 2\n")
    assert numba_setup.source_digest(files, tmp_path) != before
    files[1].write_text("x = 1\n")
    assert numba_setup.source_digest(files, tmp_path) == before


def test_a_cache_home_others_can_write_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    shared = tmp_path / "shared"
    (shared / "diagym" / "numba").mkdir(parents=True)
    (shared / "diagym" / "numba").chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    numba_setup._choose_cache_dir()
    chosen = Path(os.environ["NUMBA_CACHE_DIR"])
    assert shared not in chosen.parents
    assert chosen.name.startswith("diagym-numba-")
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
    chosen.rmdir()


def test_old_versions_beyond_the_kept_number_are_pruned(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = tmp_path / "diagym" / "numba"
    for i in range(numba_setup._KEPT_VERSIONS + 3):
        old = root / f"old{i:02d}"
        old.mkdir(parents=True)
        os.utime(old, (1000 + i, 1000 + i))
    numba_setup._choose_cache_dir()
    kept = sorted(p.name for p in root.iterdir())
    assert len(kept) == numba_setup._KEPT_VERSIONS + 1  # the current one and the newest others
    assert "old00" not in kept and f"old{numba_setup._KEPT_VERSIONS + 2:02d}" in kept


def test_explicit_cache_dir_is_respected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    numba_setup._choose_cache_dir()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
