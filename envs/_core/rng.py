"""Counter-based random streams that numba kernels and Python share bit for bit.

Every draw in diagym comes from a stream named by (task seed, stream id): stream 0 draws the
task, stream 1 the hidden resampling, stream 2 a controller's choices. A stream is SplitMix64
seeded with a hash of the pair, so it is restarted every episode, the same in the single env,
the vector env and the batched runner, and cheap enough to generate a whole task inside a
numba loop (see docs/DECISIONS.md for why this replaces numpy's PCG64 here).

Bounded integers use Lemire's multiply-shift method with exact rejection, batched: several
bounds whose product fits in 32 bits share one 32-bit word (the mixed-radix decoding of one
Lemire draw over the product), so a permutation of up to 12 items costs one word and is
exactly uniform.
"""

from __future__ import annotations

import math

import numpy as np

from diagym.envs._core.numba_setup import jit, jit_inline

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO32 = np.int64(1) << np.int64(32)
_LOW32 = np.int64(0xFFFFFFFF)

TASK_STREAM = 0
HIDDEN_STREAM = 1
CONTROLLER_STREAM = 2


@jit
def mix64(value: np.uint64) -> np.uint64:
    """SplitMix64's finaliser: a bijective 64-bit hash."""
    z = np.uint64(value)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@jit
def stream_key(seed: int, stream: int) -> np.int64:
    """The key of stream `stream` for task seed `seed` (seed taken modulo 2**64)."""
    a = mix64(np.uint64(seed) + _GOLDEN)
    b = mix64(np.uint64(stream) * _GOLDEN + _MIX1)
    return np.int64(mix64(a ^ b))


@jit
def next_seed(seed: int) -> np.int64:
    """The task seed of the next episode when reset() is called without a seed."""
    return np.int64(mix64(np.uint64(seed) ^ _MIX2) >> np.uint64(1))


@jit
def word32(key: np.int64, counter: np.int64) -> np.int64:
    """The `counter`-th 32-bit word of the stream `key` (SplitMix64 output, high half)."""
    z = mix64(np.uint64(key) + np.uint64(counter + 1) * _GOLDEN)
    return np.int64(z >> np.uint64(32))


@jit_inline
def fill_uniform(key: np.int64, counter: np.int64, out: np.ndarray, row: int, start: int,
                 count: int, bound: int) -> np.int64:
    """out[row, start:start+count] uniform on 0..bound-1; returns the advanced counter.

    Kernels write into a row of a 2-D batch array, so one kernel serves a batch and a
    single env (a batch of one).
    """
    i = 0
    while i < count:
        product = np.int64(1)
        j = i
        while j < count and product * bound <= _TWO32:
            product *= bound
            j += 1
        while True:
            r = word32(key, counter)
            counter += 1
            for t in range(i, j):
                m = r * bound
                out[row, start + t] = m >> 32
                r = m & _LOW32
            if r >= product or r >= (_TWO32 - product) % product:
                break
        i = j
    return counter


@jit_inline
def _fisher_yates(key: np.int64, counter: np.int64, out: np.ndarray, row: int, start: int,
                  n: int) -> np.int64:
    """The general path of `permutation`: Fisher-Yates over packed 32-bit words."""
    for i in range(n):
        out[row, start + i] = i
    s = 0
    while s < n - 1:
        product = np.int64(1)
        stop = s
        while stop < n - 1 and product * (n - stop) <= _TWO32:
            product *= n - stop
            stop += 1
        while True:
            word = word32(key, counter)
            counter += 1
            r = word
            for t in range(s, stop):
                r = (r * (n - t)) & _LOW32
            if r >= product or r >= (_TWO32 - product) % product:
                break
        r = word
        for t in range(s, stop):
            m = r * (n - t)
            j = start + (m >> 32)
            r = m & _LOW32
            i = start + n - 1 - t
            tmp = out[row, i]
            out[row, i] = out[row, j]
            out[row, j] = tmp
        s = stop
    return counter


_FACTORIALS = np.array([math.factorial(k) for k in range(13)], dtype=np.int64)
_ONE_WORD_PERMUTATION = 12  # 12! < 2**32 <= 13!


@jit_inline
def _accepted_word(key: np.int64, counter: np.int64,
                   product: np.int64) -> tuple[np.int64, np.int64]:
    """A 32-bit word passing the exact Lemire test for bound `product`, and the new counter."""
    while True:
        word = word32(key, counter)
        counter += 1
        low = (word * product) & _LOW32
        if low >= product or low >= (_TWO32 - product) % product:
            return word, counter


@jit_inline
def _insertions(word: np.int64, steps: int) -> np.int64:
    """Insert 1, 2, ..., steps into the sequence [0]; packed 4 bits per position.

    Element c goes to position p uniform on 0..c, p being the next digit of the word's
    mixed-radix expansion over the bounds 2, 3, ..., c+1 (one Lemire draw over their product).
    Later insertions never reorder earlier elements, so stopping after b-1 steps gives exactly
    the order of the elements < b in the full permutation.
    """
    packed = np.int64(0)
    r = word
    for c in range(1, steps + 1):
        m = r * (c + 1)
        shift = 4 * (m >> 32)
        r = m & _LOW32
        low = packed & ((np.int64(1) << shift) - 1)
        packed = low | (np.int64(c) << shift) | ((packed ^ low) << 4)
    return packed


@jit_inline
def permutation(key: np.int64, counter: np.int64, out: np.ndarray, row: int, start: int,
                n: int) -> np.int64:
    """out[row, start:start+n] = a uniform permutation of 0..n-1; returns the new counter.

    n <= 12 uses one exactly-accepted word and random insertion (`_insertions`); larger n
    uses Fisher-Yates over packed words. Both are exactly uniform.
    """
    if n > _ONE_WORD_PERMUTATION:
        return _fisher_yates(key, counter, out, row, start, n)
    word, counter = _accepted_word(key, counter, _FACTORIALS[n])
    packed = _insertions(word, n - 1)
    for i in range(n):
        out[row, start + i] = (packed >> (4 * i)) & 15
    return counter


@jit_inline
def codes_below(key: np.int64, counter: np.int64, b: int) -> tuple[np.int64, np.int64]:
    """The order of codes 0..b-1 within a uniform permutation of the 8 codes, packed.

    The word is accepted over 8! whatever b is, so every level b of one draw is the same
    permutation of 8 seen through "codes < b": levels are paired by construction.
    Returns (packed codes, 4 bits each, position 0 lowest; new counter).
    """
    word, counter = _accepted_word(key, counter, _FACTORIALS[8])
    return _insertions(word, b - 1), counter


@jit_inline
def uniform_below(key: np.int64, counter: np.int64, bound: int) -> tuple[np.int64, np.int64]:
    """One draw uniform on 0..bound-1 (bound <= 2**32) from one accepted word; new counter."""
    word, counter = _accepted_word(key, counter, np.int64(bound))
    return (word * bound) >> 32, counter
