"""Seeded DACS steering scenarios: who knows what, and which questions will be asked.

Seed 002 measures *context pollution*: an orchestrator steering N agents answers one agent's
question with another agent's value because both sit in its window. The families follow seed
002's scenario designs (its task suite): heterogeneous (phase 1: every agent from its own
domain), homogeneous (s4: every agent from one domain, the same keys with its own values),
crossfire (s5: distinct domains and no other agent's value ever offered: disjoint vocabulary),
cascade (s6: one domain, and some answers must match a decision given earlier to another
agent), dense (s7/s8: distinct domains, many decisions per agent). conflict is diagym's own
trap: agents paired on shared keys with conflicting values. Wrong options are the other
agents' values for the same attribute where the family offers them, then distractors nobody
holds, and the contexts are long enough (about 350-600 cl100k tokens each) that a flat window
of ten agents does not fit a 4096-token budget while one full context plus nine short
registry entries does.

Everything here is plain data drawn from numpy's PCG64 seeded by the scenario seed; the text
of blocks and windows is rendered in envs/dacs/window.py, and the answers that depend on the
episode (cascade decisions follow what the orchestrator actually answered) are resolved by
`options_for` at request time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SCENARIOS = ("heterogeneous", "homogeneous", "crossfire", "cascade", "dense", "conflict")
MIN_AGENTS, MAX_AGENTS = 3, 10
MIN_DECISIONS, MAX_DECISIONS = 1, 15
N_OPTIONS = 4

DOMAINS = (
    "api", "auth", "billing", "search", "cache",
    "queue", "storage", "metrics", "frontend", "mobile",
)  # fmt: skip

# attribute -> its value vocabulary (14 values; every key of an attribute shares it).
ATTRIBUTE_VALUES: dict[str, tuple[str, ...]] = {
    "region": (
        "us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2",
        "eu-central-1", "eu-north-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2",
        "ap-northeast-1", "sa-east-1", "ca-central-1",
    ),
    "runtime": (
        "python3.11", "python3.12", "node18", "node20", "go1.21", "go1.22", "java17",
        "java21", "rust1.75", "rust1.78", "dotnet8", "ruby3.3", "php8.3", "deno1.40",
    ),
    "database": (
        "postgres15", "postgres16", "mysql8", "mariadb11", "cockroachdb23", "sqlite3",
        "mongodb7", "cassandra4", "dynamodb", "redis7", "clickhouse24", "spanner",
        "aurora-mysql3", "yugabyte2",
    ),
    "timeout_ms": (
        "250", "500", "750", "1000", "1500", "2000", "2500", "3000", "4000", "5000",
        "7500", "10000", "15000", "30000",
    ),
    "replicas": tuple(str(n) for n in range(2, 16)),
    "release_branch": (
        "release/2024.01", "release/2024.02", "release/2024.03", "release/2024.04",
        "release/2024.05", "release/2024.06", "release/2024.07", "release/2024.08",
        "release/2024.09", "release/2024.10", "release/2024.11", "release/2024.12",
        "hotfix/2024.06.1", "hotfix/2024.11.2",
    ),
    "owner": (
        "team-atlas", "team-borealis", "team-cobalt", "team-delta", "team-ember",
        "team-fjord", "team-granite", "team-harbor", "team-iris", "team-juniper",
        "team-kestrel", "team-lumen", "team-meridian", "team-nimbus",
    ),
}  # fmt: skip

KEYS: tuple[str, ...] = tuple(f"{d}_{a}" for d in DOMAINS for a in ATTRIBUTE_VALUES)
VALUES: dict[str, tuple[str, ...]] = {
    f"{d}_{a}": values for d in DOMAINS for a, values in ATTRIBUTE_VALUES.items()
}
N_KEYS = len(KEYS)
N_ATTRIBUTES = len(ATTRIBUTE_VALUES)
# key id -> its attribute's index: key id = domain index * N_ATTRIBUTES + attribute index.
ATTRIBUTE_OF: tuple[int, ...] = tuple(k % N_ATTRIBUTES for k in range(N_KEYS))
MAX_VALUES = max(len(v) for v in VALUES.values())

COMPONENTS = (
    "invoice export job", "session token refresher", "rate limiter", "search reindex worker",
    "webhook dispatcher", "audit log shipper", "feature flag client", "schema migration runner",
    "thumbnail renderer", "payment retry queue", "notification fan-out", "CSV import wizard",
    "OAuth callback handler", "usage metering cron", "read-through cache layer",
    "blue-green deploy script",
)
TASK_VERBS = (
    "Stabilise", "Migrate", "Harden", "Refactor", "Scale out", "Instrument", "Rewrite",
    "Containerise",
)
TASK_GOALS = (
    "keep the nightly reconciliation run green while traffic doubles",
    "bring the p95 latency under the new service level objective",
    "ship the change before the quarterly code freeze without a maintenance window",
    "make every rollout reversible with a single command",
    "remove the last manual step from the deployment checklist",
    "cut the monthly infrastructure bill for this path by a third",
    "pass the external security review scheduled for next sprint",
    "let two more product teams build on it without asking us first",
)
PROBLEMS = (
    "a stale schema snapshot", "a flaky DNS resolver in CI", "clock skew between the runners",
    "an unpinned transitive dependency", "a race in the connection pool shutdown",
    "missing IAM permissions on the staging role", "an off-by-one in the pagination cursor",
    "a memory leak in the protobuf decoder", "an expired TLS certificate on the mock server",
    "timezone handling in the nightly fixtures",
)
TOOLS = (
    "pytest", "k6", "Terraform", "Helm", "Grafana", "Sentry", "Bazel", "Argo CD", "Locust",
    "OpenTelemetry",
)
METRICS = (
    "p95 latency", "p99 latency", "the error rate", "cold start time", "heap usage",
    "queue depth", "the cache miss ratio", "build time",
)
STATUS_TEMPLATES = (
    "Migrated the {component} integration tests to the shared fixture layer; {n} of {m} suites"
    " pass locally and the remaining failures trace back to {problem}.",
    "Profiled the {component} under a {tool} load test at {rps} requests per second; {metric}"
    " dropped from {ms} ms to {ms2} ms after batching the downstream writes.",
    "Opened {ticket} to track {problem}; added a temporary retry with jittered backoff around"
    " the {component} so the nightly run stops paging the on-call engineer.",
    "Reviewed the pull request for the {component} refactor with the platform group; two"
    " comments left about naming and one about the missing {tool} dashboards.",
    "Rolled the {component} out to the canary pool at {pct} percent of traffic; no new {tool}"
    " alerts in the first {hours} hours and {metric} is within budget.",
    "Split the {component} module into a reader and a writer package so the unit tests no"
    " longer need the full container stack; coverage is now {pct} percent.",
    "Paired with the data team on {problem}; we reproduced it in a scratch environment and"
    " wrote a regression test before touching the {component} again.",
    "Updated the runbook for the {component} with the new rollback steps, the {tool} dashboard"
    " links and the escalation path agreed in {ticket}.",
    "Backfilled {n}k rows through the {component} in throttled batches; the job finished in"
    " {hours} hours with {m} retried batches and no data drift in the audit report.",
    "Bumped the {component} dependencies and regenerated the lock file; {tool} flagged {n}"
    " deprecation warnings that are now tracked in {ticket}.",
    "Wrote the design note for moving the {component} behind an interface so the old code path"
    " can be deleted after the {quarter} freeze; circulated it for comments.",
    "Investigated a spike in {metric} on the {component}; the root cause was {problem},"
    " mitigated by pinning the previous build while the fix is in review.",
    "Added structured logging and {tool} traces to the {component}; every request now carries"
    " a correlation id from the edge proxy down to the storage layer.",
    "Ran the chaos drill on the {component}: killed {n} pods in a row, recovery took {secs}"
    " seconds and the alert fired within the agreed window.",
    "Drafted the migration checklist for the {component} and shared it in {ticket}; waiting on"
    " a sign-off from security before the staging cutover.",
    "Cleaned up {n} dead feature toggles around the {component}; the diff removes about {loc}"
    " lines and the {tool} suite stays green on every platform.",
)
MIN_STATUS, MAX_STATUS = 8, 11


@dataclass(frozen=True)
class AgentContext:
    """One agent's private context.

    facts: (key id, value id) pairs in the order the block shows them. lines: the body of the
    full block as ("task" | "status" | "fact", index) in display order (index into `status` or
    `facts`; 0 for the task). partner: the crossfire partner, -1 in other families.
    """

    index: int
    name: str
    task: str
    short_task: str
    status: tuple[str, ...]
    facts: tuple[tuple[int, int], ...]
    lines: tuple[tuple[str, int], ...]
    partner: int

    def value(self, key: int) -> int | None:
        """This agent's value id for key id `key`, or None if it has no such fact."""
        for k, v in self.facts:
            if k == key:
                return v
        return None


@dataclass(frozen=True)
class Decision:
    """One steering request, in request order.

    The options are resolved at request time (`options_for`) because a cascade decision's
    answer is whatever value agent `depends_on` was actually given by decision `source`.
    wrong_pool: candidate wrong value ids in preference order (the target is skipped).
    slots: a permutation of the 4 option slots; the target goes to slots[0], the first three
    usable wrong values to slots[1:].
    """

    index: int
    agent: int
    key: int
    depends_on: int
    source: int
    wrong_pool: tuple[int, ...]
    slots: tuple[int, ...]


@dataclass(frozen=True)
class Scenario:
    seed: int
    n_agents: int
    family: str
    decisions: int
    agents: tuple[AgentContext, ...]
    requests: tuple[Decision, ...]

    def holders(self, key: int) -> dict[int, int]:
        """agent -> value id of every agent holding a fact for key id `key`."""
        out = {}
        for agent in self.agents:
            value = agent.value(key)
            if value is not None:
                out[agent.index] = value
        return out

    def foreign_values(self, agent: int, key: int) -> set[int]:
        """Value ids other agents hold for key id `key`'s attribute, under any key: the
        values whose choice is wrong-agent contamination (one key per attribute and agent
        in every family but conflict, so across domains this is the same attribute)."""
        attribute = ATTRIBUTE_OF[key]
        return {v for other in self.agents if other.index != agent
                for k, v in other.facts if ATTRIBUTE_OF[k] == attribute}


def options_for(decision: Decision, target: int) -> tuple[tuple[int, ...], int]:
    """(4 option value ids, correct index) of `decision` when the right value is `target`."""
    wrong: list[int] = []
    for value in decision.wrong_pool:
        if value != target and value not in wrong:
            wrong.append(value)
            if len(wrong) == N_OPTIONS - 1:
                break
    options = [0] * N_OPTIONS
    options[decision.slots[0]] = target
    for slot, value in zip(decision.slots[1:], wrong, strict=True):
        options[slot] = value
    return tuple(options), decision.slots[0]


def _status_line(rng: np.random.Generator, template: str, component: str) -> str:
    def pick(seq: Sequence[str]) -> str:
        return seq[int(rng.integers(len(seq)))]

    ms = int(rng.integers(180, 900))
    return template.format(
        component=component,
        n=int(rng.integers(3, 40)),
        m=int(rng.integers(40, 60)),
        problem=pick(PROBLEMS),
        tool=pick(TOOLS),
        rps=int(rng.integers(2, 40)) * 100,
        metric=pick(METRICS),
        ms=ms,
        ms2=ms // 2 + int(rng.integers(0, 40)),
        ticket=f"OPS-{int(rng.integers(1000, 9999))}",
        pct=int(rng.integers(5, 95)),
        hours=int(rng.integers(2, 48)),
        quarter=f"Q{int(rng.integers(1, 5))}",
        secs=int(rng.integers(8, 120)),
        loc=int(rng.integers(2, 30)) * 100,
    )


def _interleave(rng: np.random.Generator, n_status: int, n_facts: int) -> list[tuple[str, int]]:
    """Status and fact lines merged in a seeded order that keeps each kind's own order."""
    kinds = np.array(["status"] * n_status + ["fact"] * n_facts)
    kinds = kinds[rng.permutation(len(kinds))]
    counters = {"status": 0, "fact": 0}
    out: list[tuple[str, int]] = [("task", 0)]
    for kind in kinds.tolist():
        out.append((kind, counters[kind]))
        counters[kind] += 1
    return out


def _design(rng: np.random.Generator, n: int, family: str
            ) -> tuple[list[list[int]], list[int], list[int]]:
    """Per-agent key ids, conflict partners and domains (seed 002's scenario designs).

    One domain for every agent (homogeneous, cascade: the same keys, own values); a distinct
    domain per agent (heterogeneous, crossfire, dense: disjoint keys); conflict: agents
    paired (0-1, 2-3, ...; with odd N the last agent joins the previous pair), a pair sharing
    seeded keys from every domain with conflicting values.
    """
    partners = [-1] * n
    if family in ("homogeneous", "cascade"):
        domain = int(rng.integers(len(DOMAINS)))
        keys = [domain * N_ATTRIBUTES + a for a in range(N_ATTRIBUTES)]
        return [list(keys) for _ in range(n)], partners, [domain] * n
    if family in ("heterogeneous", "crossfire", "dense"):
        domains = rng.permutation(len(DOMAINS))[:n].tolist()
        sets = [[d * N_ATTRIBUTES + a for a in range(N_ATTRIBUTES)] for d in domains]
        return sets, partners, domains
    keys = rng.permutation(N_KEYS).tolist()
    groups = [list(range(i, min(i + 2, n))) for i in range(0, n, 2)]
    if len(groups[-1]) == 1:
        groups[-2].extend(groups.pop())
    sets: list[list[int]] = [[] for _ in range(n)]
    at = 0
    for group in groups:
        f = int(rng.integers(6, 9))
        for agent in group:
            sets[agent] = keys[at:at + f]
        at += f
        for agent in group:
            partners[agent] = agent ^ 1 if (agent ^ 1) in group else group[1]
    return sets, partners, [int(rng.integers(len(DOMAINS))) for _ in range(n)]


def _values(rng: np.random.Generator, n: int, family: str,
            key_sets: list[list[int]]) -> list[dict[int, int]]:
    """Value ids, distinct among the agents that share a key (conflict) or an attribute
    (every other family), so "another agent's value" is unambiguous across domains too."""
    values: list[dict[int, int]] = [{} for _ in range(n)]
    groups: dict[int, list[tuple[int, int]]] = {}
    for agent, keys in enumerate(key_sets):
        for key in keys:
            group = key if family == "conflict" else ATTRIBUTE_OF[key]
            groups.setdefault(group, []).append((agent, key))
    for group in sorted(groups):
        holdings = groups[group]
        size = len(VALUES[KEYS[holdings[0][1]]])
        drawn = rng.choice(size, size=len(holdings), replace=False)
        for (agent, key), value in zip(holdings, drawn.tolist(), strict=True):
            values[agent][key] = value
    return values


def _agents(rng: np.random.Generator, n: int, key_sets: list[list[int]],
            values: list[dict[int, int]], partners: list[int],
            domains: list[int]) -> list[AgentContext]:
    """Each agent's context: its component, task, status lines and facts in a drawn order."""
    components = rng.permutation(len(COMPONENTS))[:n].tolist()
    agents = []
    for i in range(n):
        component = COMPONENTS[components[i]]
        verb = TASK_VERBS[int(rng.integers(len(TASK_VERBS)))]
        goal = TASK_GOALS[int(rng.integers(len(TASK_GOALS)))]
        domain = DOMAINS[domains[i]]
        n_status = int(rng.integers(MIN_STATUS, MAX_STATUS + 1))
        templates = rng.permutation(len(STATUS_TEMPLATES))[:n_status].tolist()
        status = tuple(_status_line(rng, STATUS_TEMPLATES[t], component) for t in templates)
        order = rng.permutation(len(key_sets[i])).tolist()
        facts = tuple((key_sets[i][j], values[i][key_sets[i][j]]) for j in order)
        agents.append(
            AgentContext(
                index=i,
                name=f"agent-{i}",
                task=f"{verb} the {component} for the {domain} platform and {goal}.",
                short_task=f"{verb.lower()} the {component} for the {domain} platform",
                status=status,
                facts=facts,
                lines=tuple(_interleave(rng, n_status, len(facts))),
                partner=partners[i],
            )
        )
    return agents


def _requests(rng: np.random.Generator, n: int, family: str, decisions: int,
              key_sets: list[list[int]], values: list[dict[int, int]],
              partners: list[int]) -> list[Decision]:
    """The decision requests in interleaved order, each with the wrong options it offers."""
    # each agent appears D times, its decisions in its own order
    order = np.repeat(np.arange(n), decisions)[rng.permutation(n * decisions)].tolist()
    key_cycles: list[list[int]] = [[] for _ in range(n)]
    last_decided: dict[tuple[int, int], int] = {}  # (agent, key) -> latest request index
    requests = []
    for index, agent in enumerate(order):
        if not key_cycles[agent]:
            keys = key_sets[agent]
            key_cycles[agent] = [keys[j] for j in rng.permutation(len(keys)).tolist()]
        key = key_cycles[agent].pop()
        own = values[agent][key]
        attribute = ATTRIBUTE_OF[key]
        holdings = {(j, k): v for j in range(n) for k, v in values[j].items()
                    if ATTRIBUTE_OF[k] == attribute}
        others = sorted({v for (j, k), v in holdings.items() if j != agent and v != own})
        others = [others[j] for j in rng.permutation(len(others)).tolist()]
        held = set(holdings.values())
        distractors = [v for v in range(len(VALUES[KEYS[key]])) if v not in held]
        distractors = [distractors[j] for j in rng.permutation(len(distractors)).tolist()]
        depends_on, source = -1, -1
        if family == "conflict":
            partner_value = values[partners[agent]][key]
            pool = [partner_value] + [v for v in others if v != partner_value] + distractors
        elif family == "crossfire":
            pool = distractors  # disjoint vocabulary: no other agent's value is ever offered
        else:
            pool = others + distractors
        if family == "cascade":
            sources = sorted({j for (j, k) in last_decided if k == key and j != agent})
            if sources and rng.random() < 0.5:
                depends_on = sources[int(rng.integers(len(sources)))]
                source = last_decided[(depends_on, key)]
                # The requester's own value is the natural wrong answer here.
                pool = [own] + others + distractors
        requests.append(
            Decision(
                index=index,
                agent=agent,
                key=key,
                depends_on=depends_on,
                source=source,
                wrong_pool=tuple(pool),
                slots=tuple(rng.permutation(N_OPTIONS).tolist()),
            )
        )
        last_decided[(agent, key)] = index
    return requests


def generate(seed: int, n_agents: int, family: str, decisions: int) -> Scenario:
    """The scenario of `seed` for these parameters (assumed valid; the env validates them)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = n_agents
    key_sets, partners, domains = _design(rng, n, family)
    values = _values(rng, n, family, key_sets)
    agents = _agents(rng, n, key_sets, values, partners, domains)
    requests = _requests(rng, n, family, decisions, key_sets, values, partners)
    return Scenario(
        seed=seed,
        n_agents=n,
        family=family,
        decisions=decisions,
        agents=tuple(agents),
        requests=tuple(requests),
    )
