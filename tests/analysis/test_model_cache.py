"""The mechanism model on disk: a cached model equals a fresh build, its lapse tables come back
equal to freshly simulated ones, other inputs select another entry, a damaged file is rebuilt,
and the cache lives under $XDG_CACHE_HOME, private to the user."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest

from diagym.analysis.diagnose import model_cache
from diagym.analysis.diagnose.hypotheses import reference_mechanisms
from diagym.analysis.diagnose.likelihood import build_model, lapse_log_p
from diagym.envs.workflow.params import WorkflowParams

BATTERY = (WorkflowParams(width=8, candidates=3, snapshot_period=0),
           WorkflowParams(width=4, candidates=4, snapshot_period=1, error_allowance=1))
CANDIDATES = [m for m in reference_mechanisms() if m.name in ("exact", "cache-2", "scan-2")]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "diagym" / "models"


def equal_models(a: model_cache.MechanismModel, b: model_cache.MechanismModel) -> bool:
    return (a.battery == b.battery and [m.name for m in a.mechanisms] == [
        m.name for m in b.mechanisms] and a.aliases == b.aliases and a.index == b.index
        and all(np.array_equal(x, y) for x, y in zip(a.log_p, b.log_p, strict=True)))


def test_a_cached_model_is_the_built_one(private_cache: Path) -> None:
    fresh = build_model(BATTERY, 128, CANDIDATES)
    first = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    assert equal_models(first, fresh)
    entries = list(private_cache.iterdir())
    assert len(entries) == 1 and (entries[0] / model_cache.MODEL_FILE).exists()
    assert not stat.S_IMODE(private_cache.stat().st_mode) & 0o077
    again = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    assert again is not first and equal_models(again, fresh)


def test_lapse_tables_come_back_as_simulated(private_cache: Path) -> None:
    first = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    simulated = lapse_log_p(first, 1, 0.2)
    model_cache.save_lapse_tables(first)
    again = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    key = next(iter(first.lapse_cache))
    assert key in again.lapse_cache
    assert all(np.array_equal(x, y) for x, y in zip(lapse_log_p(again, 1, 0.2), simulated,
                                                    strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(
        lapse_log_p(build_model(BATTERY, 128, CANDIDATES), 1, 0.2), simulated, strict=True))


def test_other_inputs_select_another_entry(private_cache: Path) -> None:
    keys = {model_cache.model_key(BATTERY, 128, CANDIDATES),
            model_cache.model_key(BATTERY, 256, CANDIDATES),
            model_cache.model_key(BATTERY[:1], 128, CANDIDATES),
            model_cache.model_key(BATTERY, 128, CANDIDATES[:2])}
    assert len(keys) == 4


def test_a_damaged_entry_is_rebuilt(private_cache: Path) -> None:
    model_cache.cached_model(BATTERY, 128, CANDIDATES)
    path = private_cache / model_cache.model_key(BATTERY, 128, CANDIDATES) / \
        model_cache.MODEL_FILE
    path.write_bytes(b"not an archive")
    rebuilt = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    assert equal_models(rebuilt, build_model(BATTERY, 128, CANDIDATES))
    assert model_cache._read(path) is not None  # written again


def test_old_entries_are_pruned(private_cache: Path) -> None:
    for simulations in range(64, 64 + 11):
        model_cache.cached_model(BATTERY[:1], simulations, CANDIDATES[:1])
    assert len(list(private_cache.iterdir())) <= 9  # the newest and 8 others
