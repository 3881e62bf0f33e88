"""The diagnosis's fast paths give what the slow ones gave, at a bounded cost counted, not
timed: the attribution replays a diagnosis's traces on one env per configuration, and its
tally equals the one of a fresh env per trace; the model cache reads a fixed number of arrays
however many lapse tables it holds, each equal to the simulated one; an entry written in
another layout is never read as this one."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.lib._npyio_impl import NpzFile

from diagym.analysis.diagnose import attribution, model_cache
from diagym.analysis.diagnose.attribution import Trace, attribution_counts, replay, tally
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.hypotheses import reference_mechanisms
from diagym.analysis.diagnose.likelihood import build_model, lapse_log_p
from diagym.controllers.workflow.parameters import LAPSE_SCALE
from diagym.envs.workflow.params import WorkflowParams
from tests.analysis.diagnose_agents import Guesser, StaleAgent, WrongRegister, play

# history R = 2, a snapshot every other success R = 0 (b = 8), and one with hidden resampling
CONFIGURATIONS = (DEFAULT_BATTERY[0], DEFAULT_BATTERY[2],
                  next(spec for spec in DEFAULT_BATTERY if spec.hidden_resampling))
BATTERY = (WorkflowParams(width=8, candidates=3, snapshot_period=0),
           WorkflowParams(width=4, candidates=4, snapshot_period=1, error_allowance=1))
CANDIDATES = [m for m in reference_mechanisms() if m.name in ("exact", "cache-2", "scan-2")]
RATES = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    """Traces of three agents on three configurations, interleaved across configurations, with
    some cut short (an episode that ended without an env outcome), so each env is reset from
    the middle of another episode."""
    played = []
    for spec, agent in zip(CONFIGURATIONS, (Guesser(), StaleAgent(),
                                               WrongRegister(CONFIGURATIONS[2].width)),
                           strict=True):
        kwargs = spec.as_dict()
        played.append(play(agent, kwargs, range(12)))
        played[-1][3::4] = [Trace(t.env_kwargs, t.task_seed, t.actions[:len(t.actions) // 2])
                            for t in played[-1][3::4]]
    return [t for group in itertools.zip_longest(*played) for t in group if t is not None]


def test_the_replay_makes_one_env_per_configuration(traces: list[Trace],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []
    make = attribution.gym.make

    def counted(env_id: str, **kwargs: Any) -> Any:
        made.append(kwargs)
        return make(env_id, **kwargs)

    monkeypatch.setattr(attribution.gym, "make", counted)
    found = attribution_counts(traces)
    assert len(made) == len(CONFIGURATIONS)
    assert sorted(map(str, made)) == sorted(str(spec.as_dict()) for spec in CONFIGURATIONS)
    assert found.decisions == sum(len(t.actions) for t in traces)


def test_one_env_per_configuration_replays_as_a_fresh_env_per_trace(
        traces: list[Trace]) -> None:
    fresh = [d for trace in traces for d in replay(trace)]  # a new env for every trace
    assert attribution_counts(traces) == tally(fresh)
    kept: list[attribution.Decision] = []
    envs: dict[str, Any] = {}
    for trace in traces:
        key = str(trace.env_kwargs)
        envs.setdefault(key, attribution.gym.make(attribution.ENV_ID, **trace.env_kwargs))
        kept.extend(attribution._replay_on(envs[key], trace))
    assert len(kept) == len(fresh)
    for a, b in zip(kept, fresh, strict=True):
        assert (a.index, a.spec, a.action, a.failure, a.known, a.initial, a.earlier) == (
            b.index, b.spec, b.action, b.failure, b.known, b.initial, b.earlier)
        assert a.observation.keys() == b.observation.keys()
        assert all(np.array_equal(a.observation[k], b.observation[k]) for k in a.observation)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(model_cache, "_kept", {})
    return tmp_path / "diagym" / "models"


def filled_cache() -> model_cache.MechanismModel:
    """A cached model with every mechanism's lapse tables at every RATES rate, on full and
    on a quarter of the seeds, saved."""
    model = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    for index, epsilon, simulations in itertools.product(range(len(model.mechanisms)), RATES,
                                                         (None, 32)):
        lapse_log_p(model, index, epsilon, simulations)
    model_cache.save_lapse_tables(model)
    return model


def test_the_model_cache_reads_a_fixed_number_of_arrays(
        private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = filled_cache()
    assert len(written.lapse_cache) == len(written.mechanisms) * len(RATES) * 2 > 30
    read: list[str] = []
    get = NpzFile.__getitem__

    def counted(self: NpzFile, key: str) -> Any:
        read.append(key)
        return get(self, key)

    monkeypatch.setattr(NpzFile, "__getitem__", counted)
    again = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    # the model's meta and one table per configuration, the lapse keys and one stack each
    assert len(read) <= 2 * (len(BATTERY) + 1)
    assert again.lapse_cache.keys() == written.lapse_cache.keys()
    built = build_model(BATTERY, 128, CANDIDATES)
    for (index, units, simulations), tables in again.lapse_cache.items():
        simulated = lapse_log_p(built, index, units / LAPSE_SCALE, simulations)
        assert all(np.array_equal(x, y) for x, y in zip(tables, simulated, strict=True))


def test_lapse_tables_of_another_process_are_kept(private_cache: Path) -> None:
    first = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    second = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    lapse_log_p(first, 0, 0.1)
    lapse_log_p(second, 1, 0.3)
    model_cache.save_lapse_tables(first)
    model_cache.save_lapse_tables(second)
    third = model_cache.cached_model(BATTERY, 128, CANDIDATES)
    assert third.lapse_cache.keys() == first.lapse_cache.keys() | second.lapse_cache.keys()


def test_an_entry_in_another_layout_is_not_read(private_cache: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    written = filled_cache()
    key = model_cache.model_key(BATTERY, 128, CANDIDATES)
    monkeypatch.setattr(model_cache, "CACHE_FORMAT", model_cache.CACHE_FORMAT + 1)
    assert model_cache.model_key(BATTERY, 128, CANDIDATES) != key
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(private_cache.parent.parent))
    # a lapse file of one array per table (the first layout) in this entry is not misread
    path = private_cache / key / model_cache.LAPSE_FILE
    model_cache._write(path, {f"{i}_{u}_{s}_{c}": table
                              for (i, u, s), tables in written.lapse_cache.items()
                              for c, table in enumerate(tables)})
    assert model_cache.cached_model(BATTERY, 128, CANDIDATES).lapse_cache == {}
    assert model_cache.LAPSE_KEYS not in model_cache._read(path)


def test_a_whole_diagnosis_replays_on_one_env_per_configuration_and_use_twice(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The attribution and the failure check each replay on one env per configuration (the
    agent's traces and the simulated ones spell a configuration differently: one env serves
    both): the failure check made an env per trace (its agent's and twice as many
    simulated)."""
    from diagym.analysis.cli import main
    from diagym.analysis.diagnose import failure_check

    made: list[str] = []
    make = attribution.gym.make

    def counted(env_id: str, **kwargs: Any) -> Any:  # gymnasium.make: the replays' only
        if sys._getframe(1).f_globals["__name__"] == attribution.__name__:
            made.append(env_id)
        return make(env_id, **kwargs)

    monkeypatch.setattr(attribution.gym, "make", counted)
    checked: list[object] = []
    real_check = failure_check.failure_check

    def watched(*args: Any, **kwargs: Any) -> Any:
        checked.append(result := real_check(*args, **kwargs))
        return result

    monkeypatch.setattr(failure_check, "failure_check", watched)
    assert main(["diagnose", "--policy", "tests.user_policy:Greedy", "--budget", "64",
                 "--json"]) == 0
    capsys.readouterr()
    configurations = 10
    assert checked and checked[0] is not None  # the failure check ran on failed calls
    assert len(made) <= 2 * configurations
