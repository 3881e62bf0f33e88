"""ClientConfig: the client's knobs checked once, the default deadline as documented, a config
and its fields as keywords making the same client, and no credential in its repr."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagym.llm_policies.client.config import ClientConfig, client_default
from diagym.llm_policies.client.transport import AsyncChatClient, ChatClient

URL = "http://127.0.0.1:9/v1"


@given(timeout=st.floats(0.01, 600), retries=st.integers(0, 10), backoff=st.floats(0, 60))
def test_the_default_deadline_is_every_attempt_and_every_backoff(timeout: float, retries: int,
                                                                 backoff: float) -> None:
    config = ClientConfig(base_url=URL, model="m", timeout=timeout, max_retries=retries,
                          max_backoff=backoff)
    assert config.deadline is None
    assert config.call_deadline == pytest.approx(timeout * (retries + 1) + backoff * retries)
    assert ClientConfig(base_url=URL, model="m", deadline=5).call_deadline == 5.0


def test_a_config_and_its_fields_as_keywords_make_the_same_client() -> None:
    config = ClientConfig(base_url=URL + "/", model="m", max_tokens=7, temperature=0.5, seed=3)
    by_config = ChatClient(config)
    by_keywords = ChatClient(base_url=URL + "/", model="m", max_tokens=7, temperature=0.5,
                             seed=3)
    assert by_config.config == by_keywords.config == config
    assert (by_config.base_url, by_config.max_tokens, by_config.temperature,
            by_config.seed) == (URL, 7, 0.5, 3)
    replaced = ChatClient(config, max_tokens=9)
    assert replaced.max_tokens == 9 and replaced.config.seed == 3
    by_config.close(), by_keywords.close(), replaced.close()


def test_a_replaced_setting_is_checked_again_with_the_same_message() -> None:
    config = ClientConfig(base_url=URL, model="m")
    with pytest.raises(ValueError, match=r"^max_tokens must be an integer >= 1 \(got 0\)$"):
        ChatClient(config, max_tokens=0)
    with pytest.raises(ValueError, match=r"^max_tokens must be an integer >= 1 \(got 0\)$"):
        AsyncChatClient(base_url=URL, model="m", max_tokens=0)
    with pytest.raises(TypeError):
        ChatClient(config, max_token=3)


def test_the_repr_shows_no_credential_and_the_defaults_are_the_fields() -> None:
    config = ClientConfig(base_url="http://user:s3cret@127.0.0.1:9/v1", model="m")
    assert "s3cret" not in repr(config)
    assert client_default("timeout") == config.timeout == 60.0
    assert client_default("max_tokens") == config.max_tokens == 64
    with pytest.raises(KeyError):
        client_default("model")
