"""Counter-based random streams that numba kernels and Python share bit for bit.

Every draw in diagym comes from a stream named by (task seed, stream id): stream 0 draws the
task, stream 1 the hidden resampling, stream 2 a controller's choices. A stream is SplitMix64
seeded with a hash of the pair, so it is restarted every episode, the same in the single env,
the vector env and the batched runner, and cheap enough to generate a whole task inside a
numba loop (see docs/DECISIONS.md for why this replaces numpy's PCG64 here).

Bounded integers use Lemire's multiply-shift method with exact rejection, batched: several
bounds whose product fits in 32 bits share one 32-bit word (the mixed-radix decoding of one
Lemire draw over the product), so a permutation of 8 costs one word and is exactly uniform.
"""

from __future__ import annotations

import numpy as np

from envs._numba import jit

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


@jit
def fill_uniform(key: np.int64, counter: np.int64, out: np.ndarray, start: int, count: int,
                 bound: int) -> np.int64:
    """out[start:start+count] uniform on 0..bound-1; returns the advanced counter."""
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
                out[start + t] = m >> 32
                r = m & _LOW32
            if r >= product or r >= (_TWO32 - product) % product:
                break
        i = j
    return counter


@jit
def _fisher_yates(key: np.int64, counter: np.int64, out: np.ndarray, start: int,
                  n: int) -> np.int64:
    """The general path of `permutation`: Fisher-Yates over packed 32-bit words."""
    for i in range(n):
        out[start + i] = i
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
            tmp = out[i]
            out[i] = out[j]
            out[j] = tmp
        s = stop
    return counter


@jit
def _permutations_of_8() -> np.ndarray:
    """Row X: the Fisher-Yates permutation of 0..7 whose draws are X's mixed-radix digits.

    One Lemire draw X uniform on 0..8!-1 over the product of the bounds 8, 7, ..., 2 has the
    successive draws of `_fisher_yates` as its digits, so PERMUTATIONS_8[X] is exactly what
    the general path builds from the same word. Each row is packed one code per byte.
    """
    table = np.zeros(40320, dtype=np.int64)
    perm = np.zeros(8, dtype=np.int64)
    for x in range(40320):
        for i in range(8):
            perm[i] = i
        rest = x
        radix = 40320
        for t in range(7):
            radix //= 8 - t
            j = rest // radix
            rest -= j * radix
            i = 7 - t
            tmp = perm[i]
            perm[i] = perm[j]
            perm[j] = tmp
        packed = np.int64(0)
        for i in range(8):
            packed |= perm[i] << (8 * i)
        table[x] = packed
    return table


PERMUTATIONS_8 = _permutations_of_8()
_FACT8 = np.int64(40320)


@jit
def permutation(key: np.int64, counter: np.int64, out: np.ndarray, start: int, n: int) -> np.int64:
    """out[start:start+n] = a uniform permutation of 0..n-1; returns the advanced counter.

    Fisher-Yates: step s (s = 0..n-2) swaps position n-1-s with a uniform position in
    0..n-1-s. The bounds n, n-1, ..., 2 are packed into 32-bit words; each word is accepted or
    rejected (exact Lemire test over the product of its bounds) before any of its swaps is
    applied, so the permutation is exactly uniform. n = 8, drawn once per operation for the
    candidate codes, reads the same permutation from a table instead of swapping.
    """
    if n != 8:
        return _fisher_yates(key, counter, out, start, n)
    while True:
        m = word32(key, counter) * _FACT8
        counter += 1
        low = m & _LOW32
        if low >= _FACT8 or low >= (_TWO32 - _FACT8) % _FACT8:
            break
    packed = PERMUTATIONS_8[m >> 32]
    for i in range(8):
        out[start + i] = (packed >> (8 * i)) & 0xFF
    return counter
