"""What a run's chat calls cost, and a spending limit that stops a run before it is exceeded.

Why this exists: a sweep against a hosted model sends thousands of calls, and a mistake in its
size (or a model that answers at length) should end in a clear stop, not an invoice. Every
result gets a `cost_usd`, and a `CostMeter` refuses the call that could cross the limit before
it is sent.

Price file (JSON; the bundled `prices.json` lists only the local models, at 0, because hosted
prices change: pass your own with --prices FILE):

    {
      "_comment": "any text",
      "models": {
        "gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
        "gemma-*": {"input": 0, "output": 0}
      }
    }

Prices are USD per 1M tokens. "input" and "output" are required; "cached_input" (prompt
tokens the provider served from its prompt cache) is optional, and absent or null means the
input price. A "_comment" field is allowed at the top and in each entry. A key with `*`, `?`
or `[` is an fnmatch pattern (case-sensitive; `*` also matches "/", so "*.gguf" covers local
model paths): a model's price is its exact key's, else the longest matching pattern's.

Cost of one result, first rule that applies: a cache hit costs 0 (no call was made); the
provider's own reported cost; the table's price of the provider's usage (prompt tokens,
cached prompt tokens, completion tokens); an error without usage costs 0; without usage, the
table's price of cl100k counts of the prompt and the reply (its reasoning included:
reasoning tokens are output tokens, as providers' completion_tokens count them). A model the
table does not price costs None (unknown), and the meter counts it as 0. A reply whose body
names another model than the one asked for is priced as the dearer of the two (a limit must
hold whichever ran), with one warning per pair.

The limit: before each call, `CostedChat` reserves an upper bound, the cl100k tokens of the
prompt (message contents, tool-call arguments, the tools JSON) at the input price plus
`max_tokens` and any reasoning budget (`reasoning_tokens`) at the output price, and the call
is refused when the money spent plus the reservations in flight plus this bound would pass
the limit. The bound is cl100k's count: a provider's own tokenizer and chat template may
count a little more, which is the margin by which a limit can be passed. A model without
`max_tokens` (in-process) bounds only its prompt.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import logging
import math
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from diagym.envs._core import tokens
from diagym.llm_policies.client.config import finite_number
from diagym.llm_policies.client.results import ChatResult
from diagym.llm_policies.client.wrapping import ChatWrapper, Messages, Tools

PER_TOKENS = 1_000_000  # prices are USD per this many tokens
BUNDLED = "prices.json"
PRICE_FIELDS = ("input", "cached_input", "output")
PATTERN_CHARS = "*?["
__all__ = ["CostLimitReached", "CostMeter", "CostedChat", "Price", "PriceTable",
           "prompt_tokens", "reply_tokens"]


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens; `cached_input` None means the input price."""

    input: float
    cached_input: float | None
    output: float

    def cost(self, prompt_tokens: int, cached_prompt_tokens: int, completion_tokens: int) -> float:
        cached = min(max(cached_prompt_tokens, 0), max(prompt_tokens, 0))
        fresh = max(prompt_tokens, 0) - cached
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = fresh * self.input + cached * cached_price + max(completion_tokens, 0) * self.output
        return total / PER_TOKENS

    def bound(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The most `prompt_tokens` and `completion_tokens` can cost, cached or not."""
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (prompt_tokens * max(self.input, cached_price)
                + completion_tokens * self.output) / PER_TOKENS


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


class _Duplicate(ValueError):
    pass


class PriceTable:
    """Model name (or fnmatch pattern) -> Price, read from a price file (module docstring)."""

    def __init__(self, prices: dict[str, Price], source: str, sha256: str) -> None:
        self._exact = {k: v for k, v in prices.items() if not any(c in k for c in PATTERN_CHARS)}
        patterns = [k for k in prices if k not in self._exact]
        self._patterns = [(k, prices[k]) for k in sorted(patterns, key=lambda k: (-len(k), k))]
        self.source = source
        self.sha256 = sha256

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        """The table in `path`, or the bundled one for None; a bad file is a ValueError naming
        the file and the field."""
        if path is None:
            name = f"bundled llm_policies/client/{BUNDLED}"
            raw = resources.files("diagym.llm_policies.client").joinpath(BUNDLED).read_bytes()
        else:
            name = str(path)
            try:
                raw = Path(path).read_bytes()
            except OSError as exc:
                raise ValueError(f"{name}: cannot read the price file "
                                 f"({exc.strerror or type(exc).__name__})") from None
        return cls(_parse(name, raw), name, hashlib.sha256(raw).hexdigest())

    def price(self, model: str) -> Price | None:
        if model in self._exact:
            return self._exact[model]
        for pattern, price in self._patterns:
            if fnmatch.fnmatchcase(model, pattern):
                return price
        return None

    def cost(self, model: str, prompt_tokens: int, cached_prompt_tokens: int | None,
             completion_tokens: int) -> float | None:
        """USD for this usage, None when the table does not price `model`."""
        price = self.price(model)
        if price is None:
            return None
        return price.cost(prompt_tokens, cached_prompt_tokens or 0, completion_tokens)

    def describe(self) -> dict[str, str]:
        """For the run record: which price file, not its contents."""
        return {"source": self.source, "sha256": self.sha256}


def _parse(name: str, raw: bytes) -> dict[str, Price]:
    try:
        data = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise ValueError(f"{name}: the price file is not UTF-8 text") from None
    except _Duplicate as exc:
        raise ValueError(f"{name}: field {exc.args[0]!r} appears twice") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"{name}: not valid JSON (nested too deeply)") from None
    shape = 'a JSON object {"models": {model name or pattern: price}}'
    if not isinstance(data, dict):
        raise ValueError(f"{name}: the price file must be {shape}")
    for key in data:
        if key not in ("_comment", "models"):
            raise ValueError(f"{name}: unknown top-level field {key!r} (allowed: _comment, "
                             "models)")
    models = data.get("models")
    if not isinstance(models, dict):
        missing = "is missing" if "models" not in data else "is not an object"
        raise ValueError(f'{name}: field "models" {missing}; the price file must be {shape}')
    return {model: _price(name, model, entry) for model, entry in models.items()}


def _price(name: str, model: str, entry: Any) -> Price:
    where = f"{name}: field models[{model!r}]"
    if not model:
        raise ValueError(f"{name}: field models has an empty model name")
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object with input, output and optionally "
                         "cached_input (USD per 1M tokens)")
    for key in entry:
        if key not in (*PRICE_FIELDS, "_comment"):
            raise ValueError(f"{where}.{key} is not a price field (allowed: "
                             f"{', '.join(PRICE_FIELDS)}, _comment)")
    values: dict[str, float | None] = {}
    for key in PRICE_FIELDS:
        value = entry.get(key)
        if value is None and key == "cached_input":
            values[key] = None
        elif key not in entry:
            raise ValueError(f"{where}.{key} is missing (USD per 1M tokens)")
        else:
            values[key] = finite_number(f"{where}.{key}", value, low=0, strict=False)
    return Price(**values)  # type: ignore[arg-type]


def _usd(amount: float) -> str:
    """4 decimals, or as many as two significant digits of a smaller amount need."""
    digits = 4
    if 0 < abs(amount) < 1e-4:
        digits = 1 - math.floor(math.log10(abs(amount)))
    return f"${amount:.{digits}f}"


class CostLimitReached(RuntimeError):
    """The next call could pass the run's cost limit; nothing was sent."""

    def __init__(self, spent: float, limit: float, estimate: float) -> None:
        super().__init__(f"cost limit reached: {_usd(spent)} spent of the {_usd(limit)} limit; "
                         f"the next call could cost up to {_usd(estimate)}; continue with "
                         "--resume and a higher --cost-limit")
        self.spent_usd = spent
        self.limit_usd = limit
        self.estimate_usd = estimate


class _Reservation:
    __slots__ = ("estimate", "open")

    def __init__(self, estimate: float) -> None:
        self.estimate = estimate
        self.open = True


class CostMeter:
    """Money spent by a run and its limit, shared by every worker of the run (thread-safe).

    Once a reservation has been refused every later one is too, so parallel workers all stop
    rather than the cheaper calls slipping in under the limit. "Spent" in the refusal counts
    the calls in flight at their reservations.
    """

    def __init__(self, limit_usd: float | None, spent_usd: float = 0.0) -> None:
        self.limit_usd = (None if limit_usd is None
                          else finite_number("cost_limit", limit_usd, low=0, strict=False))
        self._spent = finite_number("spent_usd", spent_usd, low=0, strict=False)
        self._reserved = 0.0
        self._stopped = False
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent

    def reserve(self, estimate_usd: float) -> object:
        """A reservation of `estimate_usd` to settle after the call; raises CostLimitReached
        when the call could pass the limit."""
        estimate = finite_number("estimate_usd", estimate_usd, low=0, strict=False)
        with self._lock:
            if self.limit_usd is not None:
                committed = self._spent + self._reserved
                if self._stopped or committed + estimate > self.limit_usd:
                    self._stopped = True
                    raise CostLimitReached(committed, self.limit_usd, estimate)
            self._reserved += estimate
            return _Reservation(estimate)

    def settle(self, reservation: object, actual_usd: float | None) -> None:
        """Replace the reservation by what the call cost (None, unknown: 0)."""
        if not isinstance(reservation, _Reservation):
            raise TypeError("reservation must come from this meter's reserve()")
        actual = 0.0 if actual_usd is None else finite_number("actual_usd", actual_usd, low=0,
                                                        strict=False)
        with self._lock:
            if not reservation.open:
                raise RuntimeError("a cost reservation was settled twice")
            reservation.open = False
            self._reserved = max(self._reserved - reservation.estimate, 0.0)
            self._spent += actual


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: the text parts are the tokens
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return json.dumps(content)


def prompt_tokens(messages: Messages, tools: Tools = None) -> int:
    """cl100k tokens of a request: message contents, tool-call arguments, the tools JSON."""
    total = 0
    for message in messages:
        total += tokens.count(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str):
                total += tokens.count(arguments)
    if tools:
        total += tokens.count(json.dumps(tools))
    return total


def reply_tokens(result: ChatResult) -> int:
    """cl100k tokens of a reply: its text, its tool-call arguments and the reasoning the
    server returned beside them (reasoning is output, and priced as output)."""
    return (tokens.count(result.text) + sum(tokens.count(c.arguments) for c in result.tool_calls)
            + tokens.count(result.reasoning or ""))


class CostedChat(ChatWrapper):
    """A chat model whose results carry `cost_usd`, and whose calls stop at `meter`'s limit
    (CostLimitReached, raised before the call). Inside cache.CachedChat
    (CachedChat(CostedChat(client))) a cache hit neither reserves nor costs; outside it a hit
    costs 0 but reserves its bound first, so a run at its limit stops even where the cache
    would have answered."""

    def __init__(self, inner: Any, prices: PriceTable, meter: CostMeter | None = None) -> None:
        super().__init__(inner)
        self.prices = prices
        self.meter = meter

    def complete(self, messages: Messages, tools: Tools = None) -> ChatResult:
        price = self.prices.price(self.inner.model)
        prompt = prompt_tokens(messages, tools)
        meter = self.meter
        reservation = None
        if meter is not None:
            max_tokens = ((getattr(self.inner, "max_tokens", None) or 0)
                          + (getattr(self.inner, "reasoning_tokens", None) or 0))
            reservation = meter.reserve(price.bound(prompt, max_tokens) if price else 0.0)
        cost: float | None = None
        try:
            result = self._inner_complete(messages, tools)
            cost = _cost(result, price, prompt)
            if result.served_model and result.served_model != self.inner.model:
                cost = self._served_cost(result, cost, prompt)
        finally:
            if meter is not None:
                meter.settle(reservation, cost)
        return dataclasses.replace(result, cost_usd=cost)


    def _served_cost(self, result: ChatResult, requested: float | None,
                     prompt: int) -> float | None:
        """A call the server says another model served is priced as the dearer of the two
        (a limit must hold whichever model ran), with one warning per pair and process."""
        served = _cost(result, self.prices.price(str(result.served_model)), prompt)
        pair = (self.inner.model, str(result.served_model))
        if pair not in _WARNED:
            _WARNED.add(pair)
            LOGGER.warning("diagym: warning: asked for model %r, the server says %r served it; "
                           "each such call is priced as the dearer of the two", *pair)
        return max((c for c in (requested, served) if c is not None), default=None)


_WARNED: set[tuple[str, str]] = set()  # (requested, served) pairs warned about
LOGGER = logging.getLogger("diagym.prices")


def _cost(result: ChatResult, price: Price | None, prompt: int) -> float | None:
    """The module docstring's rules, in its order; `prompt`: the request's cl100k tokens."""
    if result.cache == "hit":
        return 0.0
    if result.provider_cost_usd is not None:
        return result.provider_cost_usd
    no_usage = result.prompt_tokens is None and result.completion_tokens is None
    if no_usage and result.status == "error":
        return 0.0
    if price is None:
        return None
    return price.cost(
        result.prompt_tokens if result.prompt_tokens is not None else prompt,
        result.cached_prompt_tokens or 0,
        result.completion_tokens if result.completion_tokens is not None
        else reply_tokens(result),
    )
