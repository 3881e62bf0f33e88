"""A setting the client refuses is reported by its flag because the error carries the setting
(client/config.py SettingError), not because its message happens to start with a setting's
name: any other error of the pre-flight check is reported as it was raised."""

from __future__ import annotations

import pytest

from diagym.analysis.cli.flags_chat import _preflight
from diagym.llm_policies.client.config import ClientConfig, SettingError


def _raise(error: Exception):  # noqa: ANN202
    def check(settings: object) -> object:
        raise error

    return check


def test_a_refused_setting_is_named_by_its_flag() -> None:
    with pytest.raises(SettingError) as refused:
        ClientConfig(base_url="http://127.0.0.1:1/v1", model="m", max_tokens=0)
    with pytest.raises(ValueError) as info:
        _preflight(_raise(refused.value), None)
    assert str(info.value) == "--max-tokens must be an integer >= 1 (got 0)"


def test_an_error_whose_first_word_is_a_setting_is_not_rewritten() -> None:
    error = ValueError("model 'x' is not served here; the server lists 2 model(s)")
    with pytest.raises(ValueError) as info:
        _preflight(_raise(error), None)
    assert str(info.value) == "model 'x' is not served here; the server lists 2 model(s)"
