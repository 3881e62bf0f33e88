"""Chat-model runs from settings: the text env and the LLM policy every LLM command plays.

Why here: `diagym run --policy llm`, `llm-study`, `dacs-study --policy llm` and `rcwt sweep`
all turn the same chat-model settings into clients, and each worker of a parallel run needs
its own env, client and policy, so the construction is one factory rather than one per
command. The settings are plain data (never the API key itself, only the variable naming it),
so a run log can describe them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from diagym.llm_policies.client.config import client_default
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.families import text_family
from diagym.llm_policies.oracle import InProcessChat
from diagym.llm_policies.policy import LLMPolicy, answer_schema
from diagym.llm_policies.text_actions import TextActionWrapper

PREFLIGHT_TIMEOUT_S = 10.0  # per pre-flight request unless --timeout or a measured deadline says
CLIENT_KEYS = ("base_url", "model", "api_key_env", "timeout", "temperature", "max_tokens",
               "seed", "response_format", "reasoning_tokens", "reasoning_control")


@dataclass(frozen=True)
class ChatSettings:
    """Where the model is and how it is sampled and decoded; `budget` (RCWT: every prompt
    exactly W cl100k_base tokens; in the conversation harnesses the window the conversation
    is kept within) and `system_role` shape the prompts, the rest the client.
    response_format is the decoding: json_schema / json_object constrained, none
    unconstrained, auto negotiated (diagym.llm_policies.policy.decoding). harness and
    invalid_retries choose how the model acts (diagym.llm_policies.harness); prices, cost_limit and
    cache_dir how its calls are paid for and reused (diagym.llm_policies.client.prices, .cache);
    concurrency bounds the calls in flight, shared by every worker and lowered on HTTP 429
    (diagym.llm_policies.client.limits). capabilities: what the server's probe found
    (diagym.llm_policies.client.probe), recorded in each session line of the run log. The client's
    fields and their defaults are diagym.llm_policies.client.config's ClientConfig (documented
    there, each once)."""

    base_url: str
    model: str
    api_key_env: str = client_default("api_key_env")
    timeout: float = client_default("timeout")
    temperature: float = client_default("temperature")
    max_tokens: int = client_default("max_tokens")
    seed: int | None = client_default("seed")
    response_format: str = client_default("response_format")
    system_role: bool = True
    budget: int | None = None
    harness: str = "json"
    invalid_retries: int = 0
    concurrency: int = 1
    prices: str | None = None
    cost_limit: float | None = None
    cache_dir: str | None = None
    capabilities: dict[str, Any] | None = None
    probe_timeout: float | None = None  # per pre-flight/probe request; None: preflight_timeout
    tool_choice: str = "auto"  # the tools harness's calls (ClientConfig.tool_choice)
    bounded_fields: bool = False  # the answer's ranges in its schema (llm_policies.prompts.schema)
    # the think-then-act answer's budget and how it is sent (ClientConfig; docs/REASONING.md)
    reasoning_tokens: int | None = client_default("reasoning_tokens")
    reasoning_control: str = client_default("reasoning_control")

    def preflight_timeout(self) -> float:
        """Seconds for each pre-flight and probe request: `probe_timeout` when set (an explicit
        --timeout, or a local model's measured probe deadline), else the per-call timeout
        capped at PREFLIGHT_TIMEOUT_S, so a dead server is found out quickly."""
        if self.probe_timeout is not None:
            return self.probe_timeout
        return min(self.timeout, PREFLIGHT_TIMEOUT_S)

    def client_kwargs(self) -> dict[str, Any]:
        """ChatClient keyword arguments (without the JSON schema, which the prompt sets)."""
        return {k: getattr(self, k) for k in CLIENT_KEYS}


def make_text_env(env_id: str, **kwargs: Any) -> TextActionWrapper:
    """A registered env behind the text-action wrapper (a model answers in JSON text)."""
    return TextActionWrapper(gym.make(env_id, **kwargs))


class ChatPolicyFactory:
    """The PolicyFactory (diagym.controllers.policy) of a chat model: a new client and policy for
    each env it is given (each worker has its own), over what the run's workers share: one
    cost meter (so the limit holds across them), one response cache, one adaptive
    concurrency limit and one price table. `spent_usd` is what the run's log already paid
    (a resume counts it)."""

    text_actions = True  # the model answers in text

    def __init__(self, settings: ChatSettings, spent_usd: float = 0.0) -> None:
        from pathlib import Path

        from diagym.llm_policies.client.cache import ResponseCache
        from diagym.llm_policies.client.limits import AdaptiveLimit
        from diagym.llm_policies.client.prices import CostMeter, PriceTable

        self.settings = settings
        self.prices = PriceTable.load(Path(settings.prices) if settings.prices else None)
        if settings.cost_limit is not None and self.prices.price(settings.model) is None:
            raise ValueError(
                f"--cost-limit {settings.cost_limit:g} cannot be enforced: the price table "
                f"({self.prices.source}) has no price for model {settings.model!r}, so every "
                "call would count as $0; give --prices FILE.json with its price")
        self.meter = CostMeter(settings.cost_limit, spent_usd)
        self.cache = ResponseCache(Path(settings.cache_dir)) if settings.cache_dir else None
        self.limiter = AdaptiveLimit(settings.concurrency)
        self._made: list[LLMPolicy] = []  # this process's policies, for last_provider_error

    def __getstate__(self) -> dict[str, Any]:
        """A copy (for_executor, for_harness) or a pickle (a Ray worker) starts with no
        policies of its own: those made here hold clients that stay in this process."""
        return {**self.__dict__, "_made": []}

    def for_executor(self, executor: Any) -> ChatPolicyFactory:
        """This factory for an executor's workers (controllers.executors). In process: itself.
        Elsewhere (Ray): a copy whose meter and limit are the executor's shared ones (one
        actor each, holding the same CostMeter and AdaptiveLimit, with what was spent so
        far), so every worker of a cluster draws on one cost limit and one window of calls
        in flight, and the copy pickles to the workers; the limiter's release is sent without
        waiting. The cache is a directory: shared by
        the workers of a machine, one per machine on a cluster."""
        import functools

        from diagym.llm_policies.client.limits import AdaptiveLimit
        from diagym.llm_policies.client.prices import CostMeter

        if executor.in_process:
            return self
        other = copy.copy(self)
        # Without a limit a meter refuses nothing (the calls are still priced): no actor.
        other.meter = None if self.settings.cost_limit is None else executor.share(
            functools.partial(CostMeter, self.settings.cost_limit, self.meter.spent_usd))
        other.limiter = executor.share(functools.partial(AdaptiveLimit,
                                                         self.settings.concurrency),
                                       oneway=("release",))
        return other

    def for_harness(self, harness: str) -> ChatPolicyFactory:
        """This factory in another harness, sharing its meter, cache, limit and prices, so a
        study's cost limit and concurrency hold over every harness it compares."""
        other = copy.copy(self)
        other.settings = dataclasses.replace(self.settings, harness=harness)
        return other

    def with_reasoning(self, reasoning_tokens: int | None) -> ChatPolicyFactory:
        """This factory with another reasoning budget (None: the direct answer), sharing its
        meter, cache, limit and prices, as for_harness does (llm-study --design reasoning)."""
        other = copy.copy(self)
        other.settings = dataclasses.replace(self.settings, reasoning_tokens=reasoning_tokens)
        return other

    def session(self) -> dict[str, Any]:
        """What a run log's session line records about this factory's calls."""
        return {"server": self.settings.capabilities, "prices": self.prices.describe(),
                "cost_limit_usd": self.settings.cost_limit,
                "cache": self.cache is not None, "concurrency": self.settings.concurrency}

    def chat(self, schema: dict[str, Any] | None) -> Any:
        """A new chat client of these settings answering to `schema` (None: free text),
        priced on the run's meter, limited by its limiter and, with a cache, cached: what
        every caller that sends its own prompts (a policy made here, an RCWT sweep) talks to."""
        kwargs = self.settings.client_kwargs()
        if schema is None:  # a free-text reply cannot be held to a JSON schema
            kwargs["response_format"] = "none"
        client = ChatClient(**kwargs, json_schema=schema, limiter=self.limiter,
                            tool_choice=self.settings.tool_choice)
        return priced_and_cached(client, self.prices, self.meter, self.cache)

    def __call__(self, env: Any) -> LLMPolicy:
        settings = self.settings
        schema = answer_schema(env, settings.bounded_fields)
        policy = LLMPolicy.for_env(self.chat(schema), env, harness=settings.harness,
                                   invalid_retries=settings.invalid_retries,
                                   response_format=("none" if schema is None
                                                    else settings.response_format),
                                   session=self.session(), budget=settings.budget,
                                   system_role=settings.system_role,
                                   bounded_fields=settings.bounded_fields,
                                   reasoning_tokens=settings.reasoning_tokens)
        self._made.append(policy)
        return policy

    def last_provider_error(self) -> str | None:
        """The error of the last failed model call of a policy made in this process (the
        client's message, scrubbed of secrets), or None: what a run whose every call failed
        names as its reason. Workers elsewhere (Ray) keep theirs."""
        errors = [p.last_provider_error for p in self._made if p.last_provider_error]
        return errors[-1] if errors else None


def priced_and_cached(client: ChatClient, prices: Any, meter: Any, cache: Any) -> Any:
    """`client` priced on `meter` by `prices` and, with a ResponseCache, answered from it when
    it can: the one way a chat run wraps its clients (ChatPolicyFactory, phase 4's roles).
    The cache is outside the meter, so an answer from the cache reserves nothing and a resume
    at its limit still replays what it already paid for."""
    from diagym.llm_policies.client.cache import CachedChat
    from diagym.llm_policies.client.prices import CostedChat

    wrapped: Any = CostedChat(client, prices, meter)
    if cache is not None:
        wrapped = CachedChat(wrapped, cache, response_format=client.config.response_format)
    return wrapped


def llm_policy_factory(settings: ChatSettings, spent_usd: float = 0.0) -> ChatPolicyFactory:
    """make_policy(env) for the runner (ChatPolicyFactory)."""
    return ChatPolicyFactory(settings, spent_usd)


@dataclass(frozen=True)
class OraclePolicyFactory:
    """The PolicyFactory of the text oracle: an LLMPolicy whose chat model is the env
    family's oracle (llm_policies/oracle.py) in this process, so the run exercises the
    prompts, the parser and the text wrapper as a model's run does, with no server. Nothing
    is shared between workers; another harness is another factory."""

    budget: int | None = None
    system_role: bool = True
    harness: str = "json"
    invalid_retries: int = 0
    reasoning_tokens: int | None = None  # the think-then-act prompt and parser, checked
    text_actions = True  # a class constant, not a field: the oracle answers in text

    def __call__(self, env: Any) -> LLMPolicy:
        return LLMPolicy.for_env(InProcessChat(text_family(env).oracle()), env,
                                 harness=self.harness, invalid_retries=self.invalid_retries,
                                 budget=self.budget, system_role=self.system_role,
                                 reasoning_tokens=self.reasoning_tokens)

    def for_executor(self, executor: Any) -> OraclePolicyFactory:
        return self

    def for_harness(self, harness: str) -> OraclePolicyFactory:
        return dataclasses.replace(self, harness=harness)


def oracle_policy_factory(*, budget: int | None = None, system_role: bool = True,
                          harness: str = "json",
                          invalid_retries: int = 0) -> OraclePolicyFactory:
    """make_policy(env) for the text oracle (OraclePolicyFactory)."""
    return OraclePolicyFactory(budget=budget, system_role=system_role, harness=harness,
                               invalid_retries=invalid_retries)


def spent_in_log(log: Any) -> float:
    """USD the calls in a run log cost, voided (replayed) calls included: they were paid for.
    0 when there is no log yet."""
    from pathlib import Path

    from diagym.controllers.runlog import call_totals

    if log is None or not Path(log).exists():
        return 0.0
    totals = call_totals(Path(log))
    return totals.totals["cost_usd"] + totals.replayed_totals["cost_usd"]


PROBE = [{"role": "user", "content": "Answer OK."}]


class PreflightError(RuntimeError):
    """The server cannot serve the run: unreachable, the key refused, or no such endpoint or
    model. Raised before any episode, so a run never records failures that only say so."""


def preflight(settings: ChatSettings) -> None:
    """Check the endpoint before a run: GET {base_url}/models, and one tiny completion
    (max_tokens 1, no retries) only when that leaves a doubt (404, or a list without
    `settings.model`). Raises PreflightError for an unreachable server or HTTP 401/403/404,
    ValueError for settings the client refuses (a malformed base URL, say). A server that
    answers the list with anything else (no /models route: 405, 501) is let through, as are
    transient errors, which the run's own calls retry and categorise."""
    import os

    from diagym.llm_policies.client.probe import ProbeError, list_models
    from diagym.llm_policies.client.secrets import scrub, url_secrets

    kwargs = {**settings.client_kwargs(), "response_format": "none", "max_tokens": 1,
              "timeout": settings.preflight_timeout()}
    with ChatClient(**kwargs, max_retries=0) as client:  # validates every setting first
        key = (os.environ.get(settings.api_key_env) or "").strip()
        secrets = (key, *url_secrets(settings.base_url))

        def stop(why: str) -> PreflightError:
            return PreflightError(scrub(f"the server at {client.base_url} {why}", secrets))

        def refused(status: int) -> PreflightError:
            hint = f"check ${settings.api_key_env}" if key else (
                f"no key was sent: set ${settings.api_key_env}, or --api-key-env NAME")
            return stop(f"refused the key (HTTP {status}); {hint}")

        try:
            status, models = list_models(settings.base_url, key, kwargs["timeout"])
        except ProbeError as error:
            raise PreflightError(str(error)) from None
        if status in (401, 403):
            raise refused(status)
        doubt = status == 404 or (models is not None and settings.model not in models)
        if not doubt:
            return
        result = client.complete(PROBE)
        if result.error_kind == "connection":
            raise stop(f"cannot be reached: {result.error}; check --base-url")
        if result.error_kind == "http" and result.http_status in (401, 403):
            raise refused(result.http_status)
        if result.error_kind == "http" and result.http_status == 404:
            raise stop(f"has no chat completions for model {settings.model!r} ("
                       f"{result.error}); check that --base-url ends in /v1 and --model "
                       "names a model it serves")


PROBE_RECORD = 1  # the version of a cached probe record; bump when the probe changes


def probe_server(settings: ChatSettings, harnesses: tuple[str, ...] = ("json",),
                 preflight: Callable[[ChatSettings], None] | None = None,
                 known: dict[str, Any] | None = None) -> ChatSettings:
    """`settings` with the server's capabilities (diagym.llm_policies.client.probe), after refusing
    what it cannot serve: a harness it lacks (tools), a --llm-seed it refuses, or a
    --response-format it does not honour. With a cache dir, a probe recorded there for this
    server and model is reused, and neither the pre-flight check nor the probe sends
    anything; otherwise `preflight` runs first (a dead server or a refused key is reported
    as such, not as a missing capability). `known`: capabilities a caller knows better than
    a probe can find (a bundled model's chat format: a forced tool call passes through a
    grammar even where the model is never shown the tools), with their notes."""
    from pathlib import Path

    from diagym.llm_policies.client.cache import ResponseCache
    from diagym.llm_policies.client.probe import Capabilities, check_harness, probe
    from diagym.llm_policies.client.secrets import redact_url

    cache = ResponseCache(Path(settings.cache_dir)) if settings.cache_dir else None
    reasoning = settings.reasoning_tokens is not None
    request = {"probe": PROBE_RECORD, "base_url": redact_url(settings.base_url),
               "model": settings.model, **({"reasoning_effort": True} if reasoning else {})}
    found = cache.get_meta("probe", request) if cache is not None else None
    if found is None:
        if preflight is not None:
            preflight(settings)
        found = probe(base_url=settings.base_url, model=settings.model,
                      api_key_env=settings.api_key_env,
                      timeout=settings.preflight_timeout(), reasoning=reasoning).as_dict()
        if cache is not None:
            cache.put_meta("probe", request, found)
    if known:
        found = {**found, **{k: v for k, v in known.items() if k != "notes"},
                 "notes": {**found.get("notes", {}), **known.get("notes", {})}}
    capabilities = Capabilities(**found)
    for harness in harnesses:
        check_harness(capabilities, harness, settings.base_url)
    where = f"the server at {redact_url(settings.base_url)}"
    if settings.seed is not None and capabilities.seed is False:
        raise ValueError(f"--llm-seed: {where} refuses a sampling seed "
                         f"({capabilities.notes.get('seed', 'refused')}); drop --llm-seed")
    if settings.response_format in ("json_schema", "json_object"):
        honoured = (capabilities.json_schema if settings.response_format == "json_schema"
                    else capabilities.json_object_schema)
        if honoured is False:
            note = capabilities.notes.get(
                "json_schema" if settings.response_format == "json_schema"
                else "json_object_schema", "not honoured")
            raise ValueError(f"--response-format {settings.response_format}: {where} does not "
                             f"honour it ({note}); use --response-format auto or none")
    if settings.reasoning_tokens is not None and capabilities.reasoning_effort:
        settings = dataclasses.replace(settings, reasoning_control="reasoning_effort")
    return dataclasses.replace(settings, capabilities=found)
