"""Bit tricks for operation sets kept as int64 bitmasks inside the kernels."""

from __future__ import annotations

import numpy as np

from diagym.envs._core.numba_setup import jit, jit_inline

_DE_BRUIJN = np.int64(0x03F79D71B4CB0A89)
_LOWEST_BIT_TABLE = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _LOWEST_BIT_TABLE[(((1 << _i) * 0x03F79D71B4CB0A89) % 2**64) >> 58] = _i


@jit
def lowest_bit(mask: np.int64) -> np.int64:
    """Index of the lowest set bit of a nonzero mask, in constant time (de Bruijn multiply).

    Iterating the set bits of a small set this way costs per member, not per operation.
    """
    low = mask & -mask
    return _LOWEST_BIT_TABLE[((low * _DE_BRUIJN) >> 58) & 63]


@jit_inline
def smallest_ready(prereq_bits: np.ndarray, row: int, offset: int, n: int,
                   done: np.int64) -> int:
    """The smallest-labelled operation not in `done` whose prerequisites (bitmask
    prereq_bits[row, offset + v]) are all in `done`, or -1.

    The one definition of the schedule every correct-scheduling controller follows: the
    generator (clustered queries), the controllers and the analytic predictions all call it.
    """
    for v in range(n):
        if (done >> v) & 1 == 0 and prereq_bits[row, offset + v] & ~done == 0:
            return v
    return -1
