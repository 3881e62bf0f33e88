"""Bit tricks for operation sets kept as int64 bitmasks inside the kernels."""

from __future__ import annotations

import numpy as np

from envs._numba import jit

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
