"""The counter-based streams: exact bounded draws, two permutation paths that agree."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from envs import rng


@settings(max_examples=50, deadline=None)
@given(key=st.integers(-(2**63), 2**63 - 1), counter=st.integers(0, 2**40))
def test_permutation_table_equals_fisher_yates_loop(key: int, counter: int) -> None:
    table_path = np.zeros(8, dtype=np.int64)
    loop_path = np.zeros(8, dtype=np.int64)
    end_table = rng.permutation(np.int64(key), np.int64(counter), table_path, 0, 8)
    end_loop = rng._fisher_yates(np.int64(key), np.int64(counter), loop_path, 0, 8)
    assert np.array_equal(table_path, loop_path)
    assert end_table == end_loop
    assert sorted(table_path) == list(range(8))


def test_permutation_table_holds_every_permutation_once() -> None:
    rows = {tuple((int(p) >> (8 * i)) & 0xFF for i in range(8)) for p in rng.PERMUTATIONS_8}
    assert len(rows) == 40320 and rows == set(itertools.permutations(range(8)))


def test_permutations_of_four_are_uniform() -> None:
    out = np.zeros(4, dtype=np.int64)
    counts: dict[tuple, int] = {}
    key = rng.stream_key(12345, 0)
    counter = np.int64(0)
    for _ in range(24000):
        counter = rng.permutation(key, counter, out, 0, 4)
        counts[tuple(out)] = counts.get(tuple(out), 0) + 1
    assert len(counts) == 24
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


@settings(max_examples=30, deadline=None)
@given(bound=st.integers(1, 1000), seed=st.integers(0, 2**63 - 1))
def test_fill_uniform_stays_in_range_and_counts_words(bound: int, seed: int) -> None:
    out = np.zeros(50, dtype=np.int64)
    key = rng.stream_key(seed, 0)
    end = rng.fill_uniform(key, np.int64(0), out, 0, 50, bound)
    assert ((out >= 0) & (out < bound)).all()
    assert end >= 1


def test_fill_uniform_is_uniform() -> None:
    out = np.zeros(70000, dtype=np.int64)
    rng.fill_uniform(rng.stream_key(3, 1), np.int64(0), out, 0, out.size, 7)
    assert stats.chisquare(np.bincount(out, minlength=7)).pvalue > 1e-4


def test_streams_differ_by_seed_and_by_stream_id() -> None:
    keys = {int(rng.stream_key(seed, stream)) for seed in range(100) for stream in range(3)}
    assert len(keys) == 300
    assert rng.next_seed(5) != 5 and rng.next_seed(5) >= 0
