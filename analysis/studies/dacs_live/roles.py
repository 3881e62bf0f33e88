"""The three roles of a phase-4 trial built from plain settings: agent and judge chat models,
the orchestrator Policy.

Why a class of settings rather than a closure: a study's trials are executor units
(diagym.controllers.executors), and under `--executor ray` they play in other processes, so what
builds the roles must pickle and build them where the trial plays. Each trial gets clients of
its own (a ChatClient serves one thread), over what the study shares: one price table, one
cost meter (an executor's shared copy under Ray, so the limit holds over every worker) and
one response cache directory. Every chat call is priced (CostedChat) and, with a cache
directory, answered from the cache when it was answered before (CachedChat outside the
meter: a replayed answer reserves nothing).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagym.analysis.llm_runs import priced_and_cached
from diagym.analysis.studies.dacs_live.judge import VERDICT_SCHEMA
from diagym.llm_policies.client.cache import ResponseCache
from diagym.llm_policies.client.config import client_default
from diagym.llm_policies.client.prices import CostMeter, PriceTable
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.steering.agent_turns import FoldSystem
from diagym.llm_policies.steering.orchestrator import llm_orchestrator

ROLES = ("agent", "orchestrator", "judge")


@dataclass
class LiveRoles:
    """endpoints: role -> (base URL, model name). system_role False folds system text into
    the first user turn (a chat format without one). orchestrator_policy: a user's policy as
    an import spec (diagym.controllers.loading), made with the scenario as its one argument, instead
    of the LLM orchestrator."""

    endpoints: dict[str, tuple[str, str]]
    max_tokens: int = 160
    timeout: float = 300.0
    judge_format: str = "json"
    harness: str = "json"
    system_role: bool = True
    api_key_env: str = client_default("api_key_env")
    cache_dir: str | None = None
    prices: str | None = None
    cost_limit: float | None = None
    spent_usd: float = 0.0
    orchestrator_policy: str | None = None
    meter: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.price_table = PriceTable.load(Path(self.prices) if self.prices else None)
        if self.cost_limit is not None:
            unpriced = sorted({m for role, (_, m) in self.endpoints.items()
                               if self.price_table.price(m) is None
                               and not (role == "orchestrator" and self.orchestrator_policy)})
            if unpriced:
                raise ValueError(f"--cost-limit {self.cost_limit:g} cannot be enforced: the "
                                 f"price table ({self.price_table.source}) has no price for "
                                 f"{', '.join(map(repr, unpriced))}; give --prices FILE.json")
        if self.meter is None:
            self.meter = CostMeter(self.cost_limit, self.spent_usd)

    def for_executor(self, executor: Any) -> LiveRoles:
        """These roles for an executor's workers: in process itself; elsewhere a copy whose
        cost meter is the executor's one shared meter (what was spent so far included)."""
        if executor.in_process:
            return self
        other = copy.copy(self)
        other.meter = None if self.cost_limit is None else executor.share(
            functools.partial(CostMeter, self.cost_limit, self.meter.spent_usd))
        return other

    def chat(self, role: str, seed: int) -> Any:
        """The chat model of `role` for a trial of `seed`: priced, cached, folded."""
        url, model = self.endpoints[role]
        constrained = role == "judge" and self.judge_format == "json"
        client: Any = ChatClient(
            base_url=url, model=model, seed=seed, max_tokens=self.max_tokens,
            timeout=self.timeout, api_key_env=self.api_key_env,
            response_format="json_object" if constrained else "none",
            json_schema=VERDICT_SCHEMA if constrained else None)
        cache = None if self.cache_dir is None else ResponseCache(Path(self.cache_dir))
        client = priced_and_cached(client, self.price_table, self.meter, cache)
        return client if self.system_role or role == "orchestrator" else FoldSystem(client)

    def orchestrator(self, scenario: Any, seed: int) -> Any:
        """The orchestrator Policy: the user's (orchestrator_policy) or the LLM one."""
        if self.orchestrator_policy is not None:
            from diagym.controllers.loading import load_policy_factory

            return load_policy_factory(self.orchestrator_policy)(scenario)
        return llm_orchestrator(self.chat("orchestrator", seed), harness=self.harness,
                                system_role=self.system_role)

    def __call__(self, role: str, seed: int, scenario: Any = None) -> Any:
        if role == "orchestrator":
            return self.orchestrator(scenario, seed)
        return self.chat(role, seed)
