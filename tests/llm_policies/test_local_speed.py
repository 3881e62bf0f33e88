"""Deadlines from a local model's measured speed: the speeds a fake server is programmed with
are recovered, and the timeouts follow from them as the module's formula says."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from diagym.analysis.llm_runs import PREFLIGHT_TIMEOUT_S, ChatSettings
from diagym.llm_policies.client import local_speed
from diagym.llm_policies.client.local_speed import SAFETY, Speed, measure
from diagym.llm_policies.client.probe import PROBE_MAX_TOKENS

PROMPT_TPS, GEN_TPS = 40.0, 6.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _server(clock: FakeClock, calls: list[dict]) -> httpx.MockTransport:
    """A server whose prompt evaluation and generation take PROMPT_TPS and GEN_TPS: a prompt
    seen in the call before is not evaluated again (llama.cpp's prefix reuse)."""
    seen: set[str] = set()

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        text = body["messages"][-1]["content"]
        prompt_tokens = max(1, len(text) // 4)
        generated = body["max_tokens"]
        evaluated = 0 if text in seen else prompt_tokens
        seen.add(text)
        clock.now += evaluated / PROMPT_TPS + generated / GEN_TPS
        return httpx.Response(200, json={"usage": {"prompt_tokens": prompt_tokens,
                                                   "completion_tokens": generated}})

    return httpx.MockTransport(handle)


def test_the_programmed_speeds_are_recovered(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, calls = FakeClock(), []
    monkeypatch.setattr(local_speed.time, "monotonic", clock)
    speed = measure("http://127.0.0.1:1/v1", "m", transport=_server(clock, calls))
    assert speed.prompt_tps == pytest.approx(PROMPT_TPS, rel=1e-6)
    assert speed.gen_tps == pytest.approx(GEN_TPS, rel=1e-6)
    assert [c["max_tokens"] for c in calls] == [1, 1, local_speed.GEN_TOKENS]
    assert calls[1]["messages"] == calls[2]["messages"]  # the warm call reuses the prompt


def test_two_measurements_never_share_a_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration prompt the server has seen would be measured warm, too fast."""
    clock, calls = FakeClock(), []
    monkeypatch.setattr(local_speed.time, "monotonic", clock)
    transport = _server(clock, calls)
    measure("http://127.0.0.1:1/v1", "m", transport=transport)
    measure("http://127.0.0.1:1/v1", "m", transport=transport)
    first, second = calls[1]["messages"][0]["content"], calls[4]["messages"][0]["content"]
    assert first[:20] != second[:20]


def test_a_reply_without_token_counts_is_a_one_line_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"choices": []}))
    with pytest.raises(RuntimeError) as raised:
        measure("http://127.0.0.1:1/v1", "m", transport=transport)
    assert str(raised.value) == ("measuring the local model's speed failed: the reply has no "
                                 "usage token counts")


def test_the_deadlines_follow_the_measured_speed() -> None:
    slow = Speed(prompt_tps=17.0, gen_tps=8.0, prompt_tokens=400, seconds=30.0)
    fast = Speed(prompt_tps=600.0, gen_tps=60.0, prompt_tokens=400, seconds=1.0)
    predicted = SAFETY * (8192 / 17.0 + 64 / 8.0)
    assert slow.call_timeout(8192, 64) == 10 * math.ceil(predicted / 10)
    assert fast.call_timeout(8192, 64) == 30.0  # SAFETY x 14.7 s, below the floor
    assert slow.probe_timeout() == math.ceil(
        SAFETY * (local_speed.PROBE_PROMPT_TOKENS / 17.0 + PROBE_MAX_TOKENS / 8.0))
    assert fast.probe_timeout() == 10.0
    assert slow.call_timeout(8192, 64) > fast.call_timeout(8192, 64)


def test_the_preflight_deadline_honours_an_explicit_one() -> None:
    settings = ChatSettings(base_url="http://127.0.0.1:1/v1", model="m", timeout=300.0)
    assert settings.preflight_timeout() == PREFLIGHT_TIMEOUT_S
    assert ChatSettings(base_url="x", model="m", timeout=3.0).preflight_timeout() == 3.0
    given = ChatSettings(base_url="x", model="m", timeout=300.0, probe_timeout=300.0)
    assert given.preflight_timeout() == 300.0


@pytest.mark.parametrize(("probe_timeout", "expected"), [(None, PREFLIGHT_TIMEOUT_S),
                                                         (45.0, 45.0)])
def test_preflight_lists_models_within_the_preflight_deadline(
        monkeypatch: pytest.MonkeyPatch, probe_timeout: float | None, expected: float) -> None:
    from diagym.analysis import llm_runs
    from diagym.llm_policies.client import probe

    asked: list[float] = []

    def list_models(base_url: str, key: str | None, timeout: float) -> tuple[int, set[str]]:
        asked.append(timeout)
        return 200, {"m"}

    monkeypatch.setattr(probe, "list_models", list_models)
    llm_runs.preflight(ChatSettings(base_url="http://127.0.0.1:1/v1", model="m",
                                    timeout=120.0, probe_timeout=probe_timeout))
    assert asked == [expected]


def test_a_reply_too_short_to_time_generation_falls_back_to_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(local_speed.time, "monotonic", clock)

    def handle(request: httpx.Request) -> httpx.Response:
        clock.now += 20.0  # every call slow, and only one token generated
        return httpx.Response(200, json={"usage": {"prompt_tokens": 400,
                                                   "completion_tokens": 1}})

    speed = measure("http://127.0.0.1:1/v1", "m", transport=httpx.MockTransport(handle))
    assert speed.prompt_tps == pytest.approx(400 / 20.0)
    assert speed.gen_tps == pytest.approx(speed.prompt_tps / local_speed.GEN_SLOWDOWN_BOUND)
