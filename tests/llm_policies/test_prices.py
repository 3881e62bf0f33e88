"""Prices, costs and the cost limit.

Why these tests: a run's cost is reported to the cent and its limit is the user's protection
against an invoice, so each cost rule is checked against a figure computed by hand, the limit
against parallel workers, and a bad price file against the exact line the user will read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.envs._core import tokens
from diagym.llm_policies.client.cache import CachedChat, ResponseCache
from diagym.llm_policies.client.local_server import LOCAL_MODELS
from diagym.llm_policies.client.prices import (
    CostedChat,
    CostLimitReached,
    CostMeter,
    Price,
    PriceTable,
)
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from tests.conftest import scaled
from tests.llm_policies.test_cache import ERROR, ScriptedChat, answer

MESSAGES = [{"role": "system", "content": "You pick actions."},
            {"role": "user", "content": "pick an action"}]
TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object"}}}]
PRICES = {
    "_comment": "test prices",
    "models": {
        "m-1": {"input": 0.5, "cached_input": 0.25, "output": 2},
        "gemma-*": {"input": 1, "output": 1},
        "gemma-3-*": {"input": 3, "output": 3, "_comment": "longer pattern wins"},
        "gemma-3-270m": {"input": 5, "output": 5},
        "plain": {"input": 4, "output": 8},
    },
}


def table(tmp_path: Path, data: Any = None, raw: str | None = None) -> PriceTable:
    path = tmp_path / "prices.json"
    path.write_text(raw if raw is not None else json.dumps(PRICES if data is None else data))
    return PriceTable.load(path)


def usage(**fields: Any) -> ChatResult:
    return answer(**{"provider_cost_usd": None, "tool_calls": (), **fields})


def test_provider_usage_is_priced_with_cached_tokens_at_their_price(tmp_path: Path) -> None:
    reply = usage(prompt_tokens=1200, cached_prompt_tokens=200, completion_tokens=100)
    result = CostedChat(ScriptedChat(reply), table(tmp_path)).complete(MESSAGES)
    assert result.cost_usd == (1000 * 0.5 + 200 * 0.25 + 100 * 2) / 1e6
    assert dataclasses.replace(result, cost_usd=None) == reply


def test_cached_input_absent_or_null_is_the_input_price(tmp_path: Path) -> None:
    prices = table(tmp_path)
    assert prices.price("plain") == Price(input=4.0, cached_input=None, output=8.0)
    assert prices.cost("plain", 1200, 200, 100) == (1200 * 4 + 100 * 8) / 1e6
    data = {"models": {"x": {"input": 4, "cached_input": None, "output": 8}}}
    assert table(tmp_path, data).cost("x", 1200, 200, 100) == (1200 * 4 + 100 * 8) / 1e6


def test_the_providers_reported_cost_wins(tmp_path: Path) -> None:
    reply = usage(prompt_tokens=1200, completion_tokens=100, provider_cost_usd=0.0421)
    assert CostedChat(ScriptedChat(reply), table(tmp_path)).complete(MESSAGES).cost_usd \
        == 0.0421
    unpriced = ScriptedChat(reply, model="not-in-the-table")
    assert CostedChat(unpriced, table(tmp_path)).complete(MESSAGES).cost_usd == 0.0421


def test_without_usage_the_cl100k_counts_are_priced(tmp_path: Path) -> None:
    calls = (ToolCall("c1", "act", '{"operation": 3}'),)
    reply = usage(text="I choose 3", prompt_tokens=None, completion_tokens=None,
                  cached_prompt_tokens=None, tool_calls=calls)
    result = CostedChat(ScriptedChat(reply), table(tmp_path)).complete(MESSAGES, tools=TOOLS)
    prompt = (tokens.count("You pick actions.") + tokens.count("pick an action")
              + tokens.count(json.dumps(TOOLS)))
    # the reply's reasoning ("thought", answer()'s) is output, priced as output
    reply_tokens = (tokens.count("I choose 3") + tokens.count('{"operation": 3}')
                    + tokens.count("thought"))
    assert prompt > 0 and reply_tokens > 0
    assert result.cost_usd == (prompt * 0.5 + reply_tokens * 2) / 1e6


def test_a_cache_hit_and_an_error_without_usage_cost_nothing(tmp_path: Path) -> None:
    hit = usage(prompt_tokens=1200, completion_tokens=100, cache="hit")
    assert CostedChat(ScriptedChat(hit), table(tmp_path)).complete(MESSAGES).cost_usd == 0.0
    assert CostedChat(ScriptedChat(ERROR), table(tmp_path)).complete(MESSAGES).cost_usd == 0.0
    charged = dataclasses.replace(ERROR, prompt_tokens=1000, completion_tokens=0)
    assert CostedChat(ScriptedChat(charged), table(tmp_path)).complete(MESSAGES).cost_usd \
        == 1000 * 0.5 / 1e6


def test_an_unpriced_model_costs_none_and_the_meter_counts_zero(tmp_path: Path) -> None:
    meter = CostMeter(0.0)
    chat = CostedChat(ScriptedChat(usage(), model="unknown"), table(tmp_path), meter)
    assert chat.complete(MESSAGES).cost_usd is None
    assert meter.spent_usd == 0.0


def test_exact_names_beat_patterns_and_longer_patterns_beat_shorter(tmp_path: Path) -> None:
    prices = table(tmp_path)
    assert prices.price("gemma-3-270m").input == 5  # type: ignore[union-attr]
    assert prices.price("gemma-3-1b").input == 3  # type: ignore[union-attr]
    assert prices.price("gemma-2b").input == 1  # type: ignore[union-attr]
    assert prices.price("Gemma-2b") is None and prices.price("m-1x") is None
    assert prices.cost("nothing", 10, 0, 10) is None


def test_the_bundled_table_prices_the_local_models_at_zero() -> None:
    prices = PriceTable.load(None)
    zero = Price(input=0.0, cached_input=None, output=0.0)
    for model in (*(m.name for m in LOCAL_MODELS.values()), "/models/gemma-3-270m-Q8_0.gguf"):
        assert prices.price(model) == zero, model
    assert prices.price("gpt-4o") is None
    raw = resources.files("diagym.llm_policies.client").joinpath("prices.json").read_bytes()
    assert prices.describe() == {"source": "bundled llm_policies/client/prices.json",
                                 "sha256": hashlib.sha256(raw).hexdigest()}
    comment = json.loads(raw)["_comment"]
    assert "USD per 1M tokens" in comment and "--prices FILE" in comment


def test_describe_names_the_users_file_and_its_hash(tmp_path: Path) -> None:
    prices = table(tmp_path)
    path = tmp_path / "prices.json"
    assert prices.describe() == {"source": str(path),
                                 "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


F = "field models['m']"
BAD_FILES = {
    '{"models": ': "not valid JSON (Expecting value at line 1 column 12)",
    "[]": 'the price file must be a JSON object {"models": {model name or pattern: price}}',
    '{"model": {}}': "unknown top-level field 'model' (allowed: _comment, models)",
    "{}": 'field "models" is missing; the price file must be a JSON object {"models": '
          '{model name or pattern: price}}',
    '{"models": []}': 'field "models" is not an object; the price file must be a JSON object '
                      '{"models": {model name or pattern: price}}',
    '{"models": {"m": 1}}': f"{F} must be an object with input, output and optionally "
                            "cached_input (USD per 1M tokens)",
    '{"models": {"m": {"input": 1}}}': f"{F}.output is missing (USD per 1M tokens)",
    '{"models": {"m": {"input": -1, "output": 1}}}':
        f"{F}.input must be a finite number >= 0 (got -1.0)",
    '{"models": {"m": {"input": "0.5", "output": 1}}}':
        f"{F}.input must be a finite number >= 0 (got '0.5')",
    '{"models": {"m": {"input": 1, "output": true}}}':
        f"{F}.output must be a finite number >= 0 (got True)",
    '{"models": {"m": {"input": 1, "output": NaN}}}':
        f"{F}.output must be a finite number >= 0 (got nan)",
    '{"models": {"m": {"input": 1, "output": 1, "cached_input": 1e999}}}':
        f"{F}.cached_input must be a finite number >= 0 (got inf)",
    '{"models": {"m": {"input": 1, "output": 1, "cache": 1}}}':
        f"{F}.cache is not a price field (allowed: input, cached_input, output, _comment)",
    '{"models": {"": {"input": 1, "output": 1}}}': "field models has an empty model name",
    '{"models": {"m": {"input": 1, "output": 1}, "m": {"input": 2, "output": 2}}}':
        "field 'm' appears twice",
}


@pytest.mark.parametrize("raw", BAD_FILES)
def test_a_bad_price_file_is_one_line_naming_the_file_and_field(tmp_path: Path,
                                                                raw: str) -> None:
    with pytest.raises(ValueError) as error:
        table(tmp_path, raw=raw)
    assert str(error.value) == f"{tmp_path / 'prices.json'}: {BAD_FILES[raw]}"


def test_an_unreadable_or_undecodable_price_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError) as error:
        PriceTable.load(missing)
    assert str(error.value) == f"{missing}: cannot read the price file (No such file or directory)"
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"_comment": "caf\xe9", "models": {}}')
    with pytest.raises(ValueError) as error:
        PriceTable.load(latin)
    assert str(error.value) == f"{latin}: the price file is not UTF-8 text"


@pytest.mark.parametrize(("limit", "shown"), [(-1, "-1.0"), (float("nan"), "nan"),
                                               (float("inf"), "inf"), ("1", "'1'"),
                                               (True, "True")])
def test_a_cost_limit_must_be_a_finite_number_at_least_zero(limit: Any, shown: str) -> None:
    with pytest.raises(ValueError) as error:
        CostMeter(limit)
    assert str(error.value) == f"cost_limit must be a finite number >= 0 (got {shown})"


def test_the_limit_stops_the_call_before_it_is_sent(tmp_path: Path) -> None:
    inner = ScriptedChat(usage(prompt_tokens=10, cached_prompt_tokens=0, completion_tokens=10),
                         max_tokens=1000)
    prompt = tokens.count("You pick actions.") + tokens.count("pick an action")
    estimate = (prompt * 0.5 + 1000 * 2) / 1e6
    meter = CostMeter(estimate)  # positive control: a limit equal to the bound lets it through
    chat = CostedChat(inner, table(tmp_path), meter)
    assert chat.complete(MESSAGES).cost_usd == (10 * 0.5 + 10 * 2) / 1e6
    assert meter.spent_usd == (10 * 0.5 + 10 * 2) / 1e6 and len(inner.calls) == 1
    with pytest.raises(CostLimitReached) as error:
        chat.complete(MESSAGES)
    assert len(inner.calls) == 1
    assert str(error.value) == (
        f"cost limit reached: $0.000025 spent of the ${estimate:.4f} limit; the next call "
        f"could cost up to ${estimate:.4f}; continue with --resume and a higher --cost-limit")
    cheap = CostedChat(ScriptedChat(usage(), model="unknown"), table(tmp_path), meter)
    with pytest.raises(CostLimitReached):  # once refused, every later call is refused
        cheap.complete(MESSAGES)
    assert cheap.inner.calls == []


def test_the_estimate_counts_tool_call_arguments_and_tools(tmp_path: Path) -> None:
    messages = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "act", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "done"}]}]
    prompt = tokens.count('{"a": 1}') + tokens.count("done") + tokens.count(json.dumps(TOOLS))
    estimate = (prompt * 0.5 + 64 * 2) / 1e6
    inner = ScriptedChat(usage(prompt_tokens=0, completion_tokens=0))
    CostedChat(inner, table(tmp_path), CostMeter(estimate)).complete(messages, tools=TOOLS)
    with pytest.raises(CostLimitReached):
        CostedChat(inner, table(tmp_path), CostMeter(estimate * 0.999)).complete(messages,
                                                                                 tools=TOOLS)
    assert len(inner.calls) == 1


def test_amounts_under_a_hundredth_of_a_cent_show_two_significant_digits() -> None:
    assert str(CostLimitReached(0.0000123, 0.00002, 0.0000089)) == (
        "cost limit reached: $0.000012 spent of the $0.000020 limit; the next call could "
        "cost up to $0.0000089; continue with --resume and a higher --cost-limit")


def test_a_call_that_raises_releases_its_reservation(tmp_path: Path) -> None:
    class Broken(ScriptedChat):
        def complete(self, messages: Any, tools: Any = None) -> ChatResult:
            raise RuntimeError("boom")

    meter = CostMeter(64 * 2 / 1e6 + 1e-3)
    with pytest.raises(RuntimeError, match="boom"):
        CostedChat(Broken(), table(tmp_path), meter).complete(MESSAGES)
    assert meter.spent_usd == 0.0
    meter.settle(meter.reserve(64 * 2 / 1e6 + 1e-3), 0.0)  # the whole limit is free again
    with pytest.raises(RuntimeError) as error:
        reservation = meter.reserve(0.0)
        meter.settle(reservation, 0.0)
        meter.settle(reservation, 0.0)
    assert str(error.value) == "a cost reservation was settled twice"


def test_a_meter_without_a_limit_only_counts() -> None:
    meter = CostMeter(None, spent_usd=2.5)
    meter.settle(meter.reserve(1e9), 0.5)
    meter.settle(meter.reserve(0.0), None)
    assert meter.spent_usd == 3.0


CENTS = st.integers(min_value=0, max_value=64).map(lambda n: n / 64)  # exact binary fractions


@settings(max_examples=60, deadline=None)
@given(limit=CENTS, calls=st.lists(st.tuples(CENTS, st.floats(0, 1)), min_size=1,
                                   max_size=40))
def test_parallel_workers_never_spend_past_the_limit(limit: float,
                                                      calls: list[tuple[float, float]]) -> None:
    """Each call's actual cost is at most its estimate (a fraction of it, exact in binary)."""
    meter = CostMeter(limit)
    accepted: list[float] = []

    def call(estimate: float, share: float) -> None:
        actual = int(share * 4) / 4 * estimate
        try:
            reservation = meter.reserve(estimate)
        except CostLimitReached:
            return
        meter.settle(reservation, actual)
        accepted.append(actual)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda c: call(*c), calls))
    assert meter.spent_usd <= limit
    assert meter.spent_usd == sum(sorted(accepted))
    if sum(estimate for estimate, _ in calls) <= limit:  # no call is refused needlessly
        assert len(accepted) == len(calls)


def test_the_wrapper_forwards_attributes_and_tools(tmp_path: Path) -> None:
    old = ScriptedChat(takes_tools=False)
    chat = CostedChat(old, table(tmp_path))
    assert (chat.model, chat.base_url, chat.temperature, chat.max_tokens, chat.seed,
            chat.mode, chat.json_schema) == ("m-1", "http://127.0.0.1:8080/v1", 0.0, 64, 7,
                                             "json_schema", {"type": "object"})
    assert chat.complete(MESSAGES).status == "ok"
    new = ScriptedChat()
    CostedChat(new, table(tmp_path)).complete(MESSAGES, tools=TOOLS)
    assert new.calls == [(MESSAGES, TOOLS)]


def test_cache_hits_outside_the_meter_neither_reserve_nor_cost(tmp_path: Path) -> None:
    reply = usage(prompt_tokens=100, cached_prompt_tokens=0, completion_tokens=10)
    inner = ScriptedChat(reply, max_tokens=10)
    prompt = tokens.count("You pick actions.") + tokens.count("pick an action")
    meter = CostMeter((prompt * 0.5 + 10 * 2) / 1e6)
    chat = CachedChat(CostedChat(inner, table(tmp_path), meter), ResponseCache(tmp_path / "c"))
    first = chat.complete(MESSAGES)
    assert first.cost_usd == (100 * 0.5 + 10 * 2) / 1e6 and first.cache == "miss"
    for _ in range(3):  # the meter would refuse another call; the cache answers instead
        hit = chat.complete(MESSAGES)
        assert hit.cache == "hit" and hit.cost_usd == 0.0
    assert meter.spent_usd == first.cost_usd and len(inner.calls) == 1
    with pytest.raises(CostLimitReached):  # positive control: a new request meets the limit
        chat.complete([{"role": "user", "content": "something else"}])


def test_calls_in_flight_count_at_their_estimates(tmp_path: Path) -> None:
    """Four workers at once, a limit that covers two calls' bounds: two are sent, whatever
    the order, because nothing is settled until every worker has been let in or refused."""
    entered: list[int] = []
    refused: list[int] = []
    done = threading.Condition()
    release = threading.Event()

    class Slow(ScriptedChat):
        def complete(self, messages: Any, tools: Any = None) -> ChatResult:
            with done:
                entered.append(1)
                done.notify_all()
            assert release.wait(scaled(60))
            return self.reply

    inner = Slow(usage(prompt_tokens=0, completion_tokens=0), max_tokens=1000)
    prompt = tokens.count("You pick actions.") + tokens.count("pick an action")
    meter = CostMeter(2 * (prompt * 0.5 + 1000 * 2) / 1e6)
    chat = CostedChat(inner, table(tmp_path), meter)

    def work(_: int) -> None:
        try:
            chat.complete(MESSAGES)
        except CostLimitReached:
            with done:
                refused.append(1)
                done.notify_all()

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(work, i) for i in range(4)]
        with done:
            assert done.wait_for(lambda: len(entered) + len(refused) == 4, timeout=scaled(60))
        release.set()
        for future in futures:
            future.result()
    assert (len(entered), len(refused)) == (2, 2)
    assert meter.spent_usd == 0.0


@pytest.mark.parametrize("served", ["plain", "m-1", "unpriced-model"])
def test_a_call_another_model_served_is_priced_as_the_dearer(
        served: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The price was the requested model's whatever the server said it served: a limit on a
    cheap name could be passed by a dear model. The dearer of the two counts, with one
    warning per pair."""
    from diagym.llm_policies.client import prices as prices_module

    prices_module._WARNED.clear()
    prices = table(tmp_path)
    reply = usage(prompt_tokens=1000, completion_tokens=100, served_model=served)
    chat = CostedChat(ScriptedChat(reply, model="m-1"), prices)
    with caplog.at_level("WARNING", logger="diagym.prices"):
        costs = [chat.complete(MESSAGES).cost_usd for _ in range(3)]
    tokens = (reply.prompt_tokens, reply.cached_prompt_tokens, reply.completion_tokens)
    requested = prices.cost("m-1", *tokens)
    other = prices.cost(served, *tokens)
    assert requested is not None and prices.cost("plain", *tokens) > requested  # plain dearer
    assert costs == [max(requested, other if other is not None else 0.0)] * 3
    warned = [r.getMessage() for r in caplog.records if r.name == "diagym.prices"]
    if served == "m-1":
        assert warned == []
    else:
        assert warned == [f"diagym: warning: asked for model 'm-1', the server says "
                          f"{served!r} served it; each such call is priced as the dearer of "
                          "the two"]
