"""The counter-based streams: exact bounded draws, two permutation paths that agree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from diagym.envs._core import rng


@settings(max_examples=200, deadline=None)
@given(key=st.integers(-(2**63), 2**63 - 1), counter=st.integers(0, 2**40))
def test_codes_below_b_are_the_permutation_of_8_filtered(key: int, counter: int) -> None:
    out = np.zeros((1, 8), dtype=np.int64)
    end_full = rng.permutation(np.int64(key), np.int64(counter), out, 0, 0, 8)
    full = out[0]
    assert sorted(full) == list(range(8))
    for b in range(2, 9):
        packed, end = rng.codes_below(np.int64(key), np.int64(counter), b)
        codes = [(int(packed) >> (4 * a)) & 15 for a in range(b)]
        assert codes == [int(c) for c in full if c < b]
        assert end == end_full  # every level consumes the same words


def test_insertion_reaches_every_permutation_of_8_once() -> None:
    seen = {tuple((int(rng._insertions(np.int64(w), 7)) >> (4 * i)) & 15 for i in range(8))
            for w in (((x << 32) + 40319) // 40320 for x in range(40320))}
    assert len(seen) == 40320 and seen == set(itertools.permutations(range(8)))


@pytest.mark.parametrize("n", [4, 13])  # one-word insertion path and Fisher-Yates path
def test_permutations_are_uniform(n: int) -> None:
    rows = np.zeros((1, n), dtype=np.int64)
    out = rows[0]
    key = rng.stream_key(12345, 0)
    counter = np.int64(0)
    position_counts = np.zeros((n, n), dtype=np.int64)
    orders: dict[tuple, int] = {}
    for _ in range(24000):
        counter = rng.permutation(key, counter, rows, 0, 0, n)
        assert sorted(out) == list(range(n))
        position_counts[np.arange(n), out] += 1
        orders[tuple(out[:4])] = orders.get(tuple(out[:4]), 0) + 1
    assert stats.chisquare(position_counts.ravel()).pvalue > 1e-4
    if n == 4:
        assert len(orders) == 24 and stats.chisquare(list(orders.values())).pvalue > 1e-4


@settings(max_examples=30, deadline=None)
@given(bound=st.integers(1, 1000), seed=st.integers(0, 2**63 - 1))
def test_fill_uniform_stays_in_range_and_counts_words(bound: int, seed: int) -> None:
    rows = np.zeros((1, 50), dtype=np.int64)
    out = rows[0]
    key = rng.stream_key(seed, 0)
    end = rng.fill_uniform(key, np.int64(0), rows, 0, 0, 50, bound)
    assert ((out >= 0) & (out < bound)).all()
    assert end >= 1


def test_fill_uniform_is_uniform() -> None:
    rows = np.zeros((1, 70000), dtype=np.int64)
    out = rows[0]
    rng.fill_uniform(rng.stream_key(3, 1), np.int64(0), rows, 0, 0, out.size, 7)
    assert stats.chisquare(np.bincount(out, minlength=7)).pvalue > 1e-4


def test_streams_differ_by_seed_and_by_stream_id() -> None:
    keys = {int(rng.stream_key(seed, stream)) for seed in range(100) for stream in range(3)}
    assert len(keys) == 300
    assert rng.next_seed(5) != 5 and rng.next_seed(5) >= 0
