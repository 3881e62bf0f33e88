"""Time limits in tests follow the machine: scaled by DIAGYM_TEST_TIME_SCALE or the load."""

from __future__ import annotations

import pytest

from tests.conftest import scaled, time_scale


@pytest.mark.timeout(2)
def test_a_marked_limit_is_scaled(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker.args[0] == pytest.approx(2 * time_scale())


def test_the_default_limit_is_scaled(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker.args[0] == pytest.approx(300 * time_scale())


def test_the_scale_is_the_variable_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAGYM_TEST_TIME_SCALE", "3")
    assert time_scale() == 3 and scaled(60) == 180
    monkeypatch.setenv("DIAGYM_TEST_TIME_SCALE", "0")
    with pytest.raises(ValueError, match="DIAGYM_TEST_TIME_SCALE must be a number > 0"):
        time_scale()
    monkeypatch.delenv("DIAGYM_TEST_TIME_SCALE")
    assert time_scale() >= 1
