"""Kernel caching falls back to a user directory when the package directory is read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envs._core import numba_setup as _numba


def test_read_only_package_moves_cache_to_user_dir(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_numba.os, "access", lambda path, mode: False)
    _numba._choose_cache_dir()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "diagym" / "numba")
    assert (tmp_path / "diagym" / "numba").is_dir()


def test_writable_package_keeps_numba_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(_numba.os, "access", lambda path, mode: True)
    _numba._choose_cache_dir()
    assert "NUMBA_CACHE_DIR" not in os.environ


def test_explicit_cache_dir_is_respected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setattr(_numba.os, "access", lambda path, mode: False)
    _numba._choose_cache_dir()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
