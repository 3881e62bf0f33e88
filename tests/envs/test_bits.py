"""The constant-time lowest-set-bit index equals the obvious definition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from diagym.envs._core.bits import lowest_bit


@given(st.integers(1, 2**63 - 1) | st.integers(-(2**63), -1))
def test_lowest_bit_matches_definition(mask: int) -> None:
    expected = ((mask & -mask).bit_length() - 1)
    assert lowest_bit(mask) == expected


def test_every_single_bit() -> None:
    for i in range(63):
        assert lowest_bit(1 << i) == i
    assert lowest_bit(-(2**63)) == 63
