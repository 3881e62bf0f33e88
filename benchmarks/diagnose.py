"""Episodes a mechanism fit needs: top-1 identification of the 19 reference controllers on the
default battery (analysis/diagnose), by episode budget, with the cost of building the model.

Each controller is played as an agent (the batched runner, seeds below the model's simulation
seeds) at each budget, split evenly over the battery, `--repeats` times; a run counts as
identified when the top-ranked hypothesis is the controller or one of its play aliases
(indexed plays as exact, sham-check-4 as scan-1, fixed-check-4 as scan-4). The table gives,
per budget, the worst controller's rate and the overall rate; `needed` is the smallest budget
at which every controller reaches 95%. Also the weakest pair separations (expected log-LR per
episode) with a reference controller as the truth, and the recovery of family members not
among the 19 (interval coverage, exact MLE, interval width) at the default budget.

The adaptive design (analysis/diagnose/adaptive.py) is measured beside it on the same agents
and seeds: one run per controller and repeat with a cap of the largest budget, its top-1 read
at each smaller cap from the round that reached it (a capped run is a prefix of the uncapped
one, up to where the stop rule ends both), and the episodes it played before stopping.

The adaptive design is measured with each rule of adaptive.RULES (the parsimony rule, the
default, and the precision rule and rounds of 8 before it), with caps up to ADAPTIVE_CAP; the
reliability table sets the posterior the design claims for its leader at the stop against how
often that leader is the truth.

`--adaptive-only` measures just that efficiency curve (the fixed rows up to the cap beside
each rule's) at `--adaptive-cap`, for `--rules`, with two more tables: the stops on
failure-mode agents (FAILURE_MODE_AGENTS, their hypothesis rows simulated: the parsimony
rule's prior works against them, so its claims are checked there too), and the stop bounds:
per controller, the nearest rival at its best configuration and the episodes a sequential
test needs on average there to reach the stop's odds (Wald), a lower bound for any design on
this battery.

The honest-diagnosis rows (issue 24): lapse recovery (exact and cache-3 simulated at lapse
0.1, 0.2, 0.3: how often the top is right and its fitted lapse interval holds the truth), the
fit test's rejection rate (p < 0.01) on the 19 controllers and on the held-out agents of
tests/analysis/heldout_agents.py (played through the env by diagnose_policy), and the
forecast error on configurations outside the battery (mean |predicted - observed| success,
observed on OBSERVED_EPISODES fresh seeds, and the share of observed inside the interval,
also apart for the forecasts in the battery's support and those marked extrapolated).

Interval coverage (issue 37): how often the 95% lapse interval of an agent that is exactly
cache-6@0.05 holds 0.05, over COVERAGE_RUNS runs, with its outcomes simulated through the
model's kernel on the task seeds of each seed plan (battery.SEED_PLANS: a block per
configuration, what the diagnosis plays, and the shared seeds of logs written before); with
`--only coverage --full-runs N`, also N full diagnoses of that agent played through the env
by diagnose_policy.

    python benchmarks/diagnose.py [--repeats 40] [--quick]
                                  [--only fixed|honesty|forecast|coverage|summary]
                                  [--full-runs 60]
                                  [--json-out FILE]
    python benchmarks/diagnose.py --adaptive-only [--adaptive-cap 128] [--rules parsimony]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym.analysis.diagnose.adaptive import RULES, STOP_POSTERIOR, Rule, run_design  # noqa: E402
from diagym.analysis.diagnose.battery import (  # noqa: E402
    DEFAULT_BATTERY,
    DEFAULT_BUDGET,
    DEFAULT_SHARES,
    SEED_PLANS,
    allocate,
    first_seed,
    kl_matrix,
)
from diagym.analysis.diagnose.fit_test import (  # noqa: E402
    Hypothesis,
    fit_test,
    forecast,
    plausible,
)
from diagym.analysis.diagnose.honesty import FIT_ALPHA, profile_interval  # noqa: E402
from diagym.analysis.diagnose.hypotheses import FAILURE_MODES, families, hypotheses  # noqa: E402
from diagym.analysis.diagnose.likelihood import (  # noqa: E402
    LAPSE_GRID,
    SIMULATION_SEED,
    MechanismModel,
    count_outcomes,
    fit,
    fit_family,
    fit_lapse,
    lapse_profile,
    outcome_count,
    ranking_scores,
    simulate_codes,
    with_lapse,
)
from diagym.analysis.diagnose.model_cache import cached_model  # noqa: E402
from diagym.analysis.diagnose.run import diagnose_policy, label  # noqa: E402
from diagym.controllers.workflow.batched import episode_columns  # noqa: E402
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES, CONTROLLERS  # noqa: E402
from diagym.envs.workflow.params import WorkflowParams  # noqa: E402

BUDGETS = (32, 64, 128, 256, 512, 1024)
ADAPTIVE_CAP = 512
TARGET = 0.95
REJECT_BELOW = FIT_ALPHA
LAPSE_AGENTS = tuple((name, epsilon) for name in ("exact", "cache-3")
                     for epsilon in (0.1, 0.2, 0.3))
# Configurations outside DEFAULT_BATTERY (other N, widths, b, feedback and R, and barriers at
# a depth its barriers configuration does not play) to forecast on.
HELD_OUT_CONFIGURATIONS = (
    {"n_ops": 12, "depth": 3, "width": 6, "candidates": 5, "snapshot_period": 3},
    {"n_ops": 8, "depth": 4, "width": 8, "candidates": 4, "snapshot_period": 0,
     "error_allowance": 1},
    {"n_ops": 16, "depth": 4, "width": 5, "candidates": 3, "snapshot_period": 2},
    {"n_ops": 8, "depth": 2, "width": 6, "candidates": 6, "snapshot_period": 1,
     "hidden_resampling": True},
    {"family": "barriers", "n_ops": 8, "depth": 4, "width": 6, "candidates": 4,
     "snapshot_period": 0, "error_allowance": 1},
)
OBSERVED_EPISODES = 4000
# Agents outside the 19 whose stops the reliability table also scores: the parsimony rule's
# prior odds favour the 19 over the failure modes, so its claims are checked on both.
FAILURE_MODE_AGENTS = ("perseverate-0.5", "schedule-lapse-0.2", "update-miss-0.5",
                       "update-delay-1", "offset+1")
RELIABILITY_BINS = (0.0, 0.5, 0.9, 0.99, 0.999, 1.0 + 1e-12)
COVERAGE_TRUTH = ("cache-6", 0.05)
COVERAGE_RUNS = 60


def agent_seeds(repeat: int, c: int, first: int, episodes: int) -> np.ndarray:
    """Task seeds of an agent's episodes first.. of battery configuration c in one repeat (a
    block of 10**4 per configuration, 10**6 per repeat, so the 11 configurations of a repeat
    stay inside its own block)."""
    seeds = 10**7 + repeat * 10**6 + c * 10**4 + first + np.arange(episodes, dtype=np.int64)
    assert not episodes or seeds.max() < SIMULATION_SEED
    return seeds


def identified(model: MechanismModel, name: str, budget: int, repeat: int) -> tuple[bool, str]:
    counts = []
    for c, (spec, per) in enumerate(zip(DEFAULT_BATTERY, allocate(DEFAULT_SHARES, budget),
                                        strict=True)):
        seeds = agent_seeds(repeat, c, 0, per)
        counts.append(count_outcomes(spec, episode_columns(spec, name, seeds)[0]))
    top = fit(model, counts)[0]
    return name in top.names, top.mechanism.name


def agent_counts(name: str, spec: WorkflowParams, seeds: np.ndarray) -> np.ndarray:
    """Outcome counts of `name` on `seeds`: a reference controller played by the batched
    runner, or (a failure-mode agent) its hypothesis row simulated on them."""
    if name in CONTROLLERS:
        return count_outcomes(spec, episode_columns(spec, name, seeds)[0])
    row = next(m.row for m in families()[failure_mode_family(name)] if m.name == name)
    return np.bincount(simulate_codes(spec, row, seeds), minlength=outcome_count(spec))


def failure_mode_family(name: str) -> str:
    return next(f for f in FAILURE_MODES if any(m.name == name for m in families()[f]))


def adaptive_run(model: MechanismModel, name: str, repeat: int, caps: tuple[int, ...],
                 rule: Rule) -> tuple[dict[int, bool], int, bool, float, bool]:
    """({cap: top-1 right}, episodes played before the stop rule, top-1 right at the stop,
    the leader's posterior claimed at the stop, the leader right)."""
    counts = [np.zeros(outcome_count(spec), dtype=np.int64) for spec in DEFAULT_BATTERY]
    used = [0] * len(DEFAULT_BATTERY)
    snapshots: list[tuple[int, list[np.ndarray]]] = [(0, [c.copy() for c in counts])]

    def play_round(c: int, episodes: int) -> np.ndarray:
        spec = DEFAULT_BATTERY[c]
        counts[c] = counts[c] + agent_counts(name, spec, agent_seeds(repeat, c, used[c],
                                                                     episodes))
        used[c] += episodes
        snapshots.append((sum(used), [x.copy() for x in counts]))
        return counts[c]

    design = run_design(model, max(caps), play_round, rule)
    right = {}
    for cap in caps:
        state = [s for played, s in snapshots if played <= cap][-1]
        right[cap] = name in fit(model, state)[0].names
    last = design.steps[-1]
    leader_right = name in (last.leader, *model.aliases[last.leader])
    return (right, sum(used), name in fit(model, counts)[0].names, last.leader_posterior,
            leader_right)


def adaptive_rows(model: MechanismModel, rule: Rule, repeats: int, cap: int = ADAPTIVE_CAP,
                  agents: tuple[str, ...] = CONTROLLER_NAMES) -> dict:
    """The adaptive design under `rule` on every agent: top-1 by cap, the stop's episodes
    and the reliability of its claimed posterior."""
    caps = tuple(b for b in BUDGETS if b < cap) + (cap,)
    start = time.perf_counter()
    rates: dict[int, dict[str, float]] = {b: {} for b in caps}
    stops: dict[str, list[int]] = {}
    right_at_stop = 0
    claims: list[tuple[float, bool]] = []
    leader_right_by_agent: dict[str, float] = {}
    for name in agents:
        hits = dict.fromkeys(caps, 0)
        for repeat in range(repeats):
            right, played, ok, claimed, leader_right = adaptive_run(model, name, repeat, caps,
                                                                    rule)
            for b in caps:
                hits[b] += right[b]
            stops.setdefault(name, []).append(played)
            right_at_stop += ok
            claims.append((claimed, leader_right))
        leader_right_by_agent[name] = float(np.mean([r for _, r in claims[-repeats:]]))
        for b in caps:
            rates[b][name] = hits[b] / repeats
    seconds = time.perf_counter() - start
    rows = []
    for b in caps:
        worst = min(rates[b], key=rates[b].get)
        rows.append({"budget": b, "worst": worst, "worst_rate": rates[b][worst],
                     "overall_rate": round(float(np.mean(list(rates[b].values()))), 4)})
    all_stops = [n for runs in stops.values() for n in runs]
    return {
        "rule": rule.name, "rows": rows,
        "needed": next((r["budget"] for r in rows if r["worst_rate"] >= TARGET), None),
        "episodes_at_stop": {"median": float(np.median(all_stops)), "max": max(all_stops),
                             "per_controller_median": {n: float(np.median(v))
                                                       for n, v in stops.items()}},
        "right_at_stop": round(right_at_stop / len(all_stops), 4),
        "reliability": reliability(claims),
        "leader_right_by_agent": leader_right_by_agent,
        "seconds_per_run": round(seconds / len(all_stops), 4),
    }


def reliability(claims: list[tuple[float, bool]]) -> list[dict]:
    """Claimed posterior of the stop's leader against the share of stops whose leader was the
    truth, by RELIABILITY_BINS."""
    out = []
    for low, high in zip(RELIABILITY_BINS, RELIABILITY_BINS[1:], strict=False):
        inside = [(c, r) for c, r in claims if low <= c < high]
        if inside:
            out.append({"claimed": f"{low:g}..{min(high, 1.0):g}", "runs": len(inside),
                        "mean_claimed": round(float(np.mean([c for c, _ in inside])), 4),
                        "observed": round(float(np.mean([r for _, r in inside])), 4)})
    return out


def binomial_interval(hits: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a rate."""
    from scipy.stats import beta

    low = 0.0 if hits == 0 else float(beta.ppf(0.025, hits, n - hits + 1))
    high = 1.0 if hits == n else float(beta.ppf(0.975, hits + 1, n - hits))
    return round(low, 4), round(high, 4)


def simulated_counts(row: tuple[int, ...], repeat: int) -> list[np.ndarray]:
    """Outcome counts of a mechanism row played as an agent on the default allocation."""
    return [np.bincount(simulate_codes(spec, row, agent_seeds(repeat, c, 0, n)),
                        minlength=outcome_count(spec))
            for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, allocate(DEFAULT_SHARES),
                                              strict=True))]


def lapse_recovery(model: MechanismModel, repeats: int) -> list[dict]:
    """Per (mechanism, lapse): how often fit_lapse's top is the mechanism, its lapse interval
    holds the true rate, and both."""
    out = []
    for name, epsilon in LAPSE_AGENTS:
        row = with_lapse(next(m.row for m in hypotheses()[0] if name == m.name
                              or name in model.aliases.get(m.name, ())), epsilon)
        top_right = covered = both = 0
        for repeat in range(repeats):
            top = fit_lapse(model, simulated_counts(row, repeat))[0]
            right = name in top.names
            holds = top.epsilon_interval is not None and \
                top.epsilon_interval[0] <= epsilon <= top.epsilon_interval[1]
            top_right += right
            covered += holds
            both += right and holds
        out.append({"agent": f"{name}@{epsilon:g}", "runs": repeats,
                    "top_right": top_right / repeats, "interval_holds": covered / repeats,
                    "both": both / repeats})
    return out


def interval_holds(model: MechanismModel, counts: list[np.ndarray]) -> bool:
    """Whether the lapse interval of COVERAGE_TRUTH's mechanism, profiled on `counts`, holds
    its lapse."""
    name, epsilon = COVERAGE_TRUTH
    index = model.index[name]
    low, high = profile_interval(LAPSE_GRID, lapse_profile(model, counts, index, LAPSE_GRID))
    return low <= epsilon <= high


def interval_coverage(model: MechanismModel, runs: int = COVERAGE_RUNS) -> dict:
    """Per seed plan, how often COVERAGE_TRUTH's lapse interval holds its lapse over `runs`
    runs simulated through the kernel on the plan's task seeds (battery seed run * 1000)."""
    name, epsilon = COVERAGE_TRUTH
    row = with_lapse(model.mechanisms[model.index[name]].row, epsilon)
    out = {}
    for plan in SEED_PLANS:
        held = 0
        for run in range(runs):
            counts = [np.bincount(simulate_codes(spec, row, first_seed(run * 1000, c, plan)
                                                 + np.arange(n, dtype=np.int64)),
                                  minlength=outcome_count(spec))
                      for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, allocate(DEFAULT_SHARES),
                                                        strict=True))]
            held += interval_holds(model, counts)
        out[plan] = {"runs": runs, "held": held, "rate": round(held / runs, 4),
                     "interval": binomial_interval(held, runs)}
    return {"agent": f"{name}@{epsilon:g}", **out}


def full_interval_coverage(model: MechanismModel, runs: int) -> dict:
    """COVERAGE_TRUTH played through the env (its controller row, lapse included, by the
    per-step reference adapter) and diagnosed by diagnose_policy on battery seeds run * 1000:
    how often its lapse interval holds."""
    from diagym.controllers.workflow.adapter import ReferencePolicy

    name, epsilon = COVERAGE_TRUTH
    row = np.array(with_lapse(model.mechanisms[model.index[name]].row, epsilon), dtype=np.int64)

    def agent(env: Any) -> ReferencePolicy:
        policy = ReferencePolicy.for_env("exact", env)
        policy._cparams = row  # the adapter plays any controller row as the runner does
        return policy

    held = 0
    start = time.perf_counter()
    for run in range(runs):
        diagnosis = diagnose_policy(agent, seed=run * 1000)
        counts = [next(c.counts for c in diagnosis.configurations if c.spec == spec)
                  for spec in DEFAULT_BATTERY]
        held += interval_holds(model, counts)
    return {"agent": f"{name}@{epsilon:g}", "runs": runs, "held": held,
            "rate": round(held / max(runs, 1), 4), "interval": binomial_interval(held, runs),
            "seconds_per_diagnosis": round((time.perf_counter() - start) / max(runs, 1), 2)}


def print_coverage(found: dict) -> None:
    for plan in SEED_PLANS:
        r = found[plan]
        print(f"interval coverage, {found['agent']} (seed plan {plan}, simulated): "
              f"{r['held']} of {r['runs']} ({r['rate']:.3f}, 95% {r['interval'][0]:.3f}.."
              f"{r['interval'][1]:.3f})")


def controller_fit_tests(model: MechanismModel, repeats: int) -> dict:
    """The fit test's rejection rate (p < REJECT_BELOW) on the 19 controllers at the default
    budget: the rate a calibrated test gives is about REJECT_BELOW."""
    labels = [label(s) for s in DEFAULT_BATTERY]
    rejected: dict[str, int] = {}
    p_values = []
    for name in CONTROLLER_NAMES:
        for repeat in range(repeats):
            counts = []
            for c, (spec, per) in enumerate(zip(DEFAULT_BATTERY, allocate(DEFAULT_SHARES),
                                                strict=True)):
                seeds = agent_seeds(repeat, c, 0, per)
                counts.append(count_outcomes(spec, episode_columns(spec, name, seeds)[0]))
            hypothesis = Hypothesis.of_fit(model, fit_lapse(model, counts)[0])
            test = fit_test(model, counts, hypothesis, labels)
            p_values.append(test.p_value)
            if test.rejected:
                rejected[name] = rejected.get(name, 0) + 1
    n, hits = len(p_values), sum(rejected.values())
    return {"runs": n, "rejected": hits, "rate": round(hits / n, 4),
            "interval": binomial_interval(hits, n), "rejected_by_controller": rejected,
            "p_quantiles": {q: round(float(np.quantile(p_values, q)), 4)
                            for q in (0.01, 0.05, 0.5)}}


def held_out_fit_tests(seeds: tuple[int, ...]) -> dict:
    """Every held-out agent (tests/analysis/heldout_agents.py) diagnosed through the env on
    the default battery, per task seed: its top, fit p-value and verdict."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.analysis.heldout_agents import HELD_OUT

    rows = []
    for agent, (cls, truth, where) in HELD_OUT.items():
        for seed in seeds:
            diagnosis = diagnose_policy(lambda env, cls=cls: cls(env), seed=seed)
            top = diagnosis.ranked[0]
            mixture = diagnosis.mixture
            rows.append({"agent": agent, "truth": truth, "where": where, "seed": seed,
                         "top": f"{top.mechanism.name}@{top.epsilon:g}",
                         "mixture": None if mixture is None else list(mixture.names),
                         "p_value": round(diagnosis.fit.p_value, 4),
                         "rejected": diagnosis.fit.rejected,
                         "verdict": diagnosis.fit.verdict})
    summary = {}
    for where, key in (("outside", "outside"), ("lapse", "inside_with_lapse"),
                       ("failure mode", "inside_by_a_failure_mode")):
        picked = [r for r in rows if r["where"] == where]
        hits = sum(r["rejected"] for r in picked)
        summary[key] = {"runs": len(picked), "rejected": hits,
                        "rate": round(hits / len(picked), 4),
                        "interval": binomial_interval(hits, len(picked))}
    return {"rows": rows, **summary}


def forecast_error(model: MechanismModel, repeats: int) -> dict:
    """Forecasts on HELD_OUT_CONFIGURATIONS of agents diagnosed at the default budget (the 19
    controllers and the lapsing agents of LAPSE_AGENTS), against their success observed there
    on OBSERVED_EPISODES fresh seeds."""
    agents = [(n, CONTROLLERS[n]) for n in CONTROLLER_NAMES]
    for name, epsilon in LAPSE_AGENTS:
        row = next(m.row for m in hypotheses()[0] if m.name == name)
        agents.append((f"{name}@{epsilon:g}", with_lapse(row, epsilon)))
    errors, inside, widths, in_support = [], [], [], []
    by_agent: dict[str, list[float]] = {}
    for name, row in agents:
        for repeat in range(repeats):
            ranked = fit_lapse(model, simulated_counts(row, repeat))
            best = Hypothesis.of_fit(model, ranked[0])
            alternatives = plausible(model, ranked)
            for kwargs in HELD_OUT_CONFIGURATIONS:
                predicted = forecast(model, best, alternatives, dict(kwargs))
                spec = WorkflowParams.from_kwargs(**kwargs)
                seeds = 7 * 10**8 + repeat * 10**5 + np.arange(OBSERVED_EPISODES,
                                                               dtype=np.int64)
                codes = simulate_codes(spec, row, seeds)
                observed = float(np.mean((codes // (spec.error_allowance + 2))
                                         % (spec.n_ops + 1) == spec.n_ops))
                errors.append(abs(predicted.success - observed))
                by_agent.setdefault(name, []).append(errors[-1])
                low, high = predicted.interval
                inside.append(low <= observed <= high)
                in_support.append(not predicted.extrapolated)
                widths.append(high - low)
    return {"forecasts": len(errors), "agents": len(agents),
            "configurations": len(HELD_OUT_CONFIGURATIONS),
            "mean_abs_error": round(float(np.mean(errors)), 4),
            "max_abs_error": round(float(np.max(errors)), 4),
            "inside_interval": round(float(np.mean(inside)), 4),
            "in_support": {"forecasts": int(np.sum(in_support)),
                           "inside_interval": _share(inside, in_support)},
            "extrapolated": {"forecasts": int(len(in_support) - np.sum(in_support)),
                             "inside_interval": _share(inside, np.logical_not(in_support))},
            "mean_interval_width": round(float(np.mean(widths)), 4),
            "worst_agents": dict(sorted(((n, round(float(np.mean(e)), 4))
                                         for n, e in by_agent.items()),
                                        key=lambda x: -x[1])[:5])}


def _share(hits: list[bool], where: Any) -> float | None:
    """The share of `hits` among the forecasts `where` marks (None: no such forecast)."""
    where = np.asarray(where, dtype=bool)
    return round(float(np.mean(np.asarray(hits)[where])), 4) if where.any() else None


RECOVERED = (("cache-k", "cache-3"), ("cache-k", "cache-5"), ("scan-s", "scan-3"),
             ("scan-s", "scan-5"), ("cache-k+scan-s", "cache-3+scan-3"))


def recovery(model: MechanismModel, repeats: int) -> dict[str, dict[str, float]]:
    """Per family member not among the 19, at the default budget: how often its interval
    holds the true parameter, how often the MLE is it, and the mean interval width."""
    shares = allocate(DEFAULT_SHARES)
    found = {}
    for family, name in RECOVERED:
        member = next(m for m in families()[family] if m.name == name)
        covered = exact = width = 0
        for repeat in range(repeats):
            counts = [np.bincount(simulate_codes(spec, member.row, agent_seeds(repeat, c, 0, n)),
                                  minlength=outcome_count(spec))
                      for c, (spec, n) in enumerate(zip(DEFAULT_BATTERY, shares, strict=True))]
            fitted = fit_family(model, counts, family)
            covered += all(lo <= member.params[k] <= hi
                           for k, (lo, hi) in fitted.intervals.items())
            exact += fitted.params == member.params
            width += sum(hi - lo for lo, hi in fitted.intervals.values())
        found[name] = {"covered": covered / repeats, "mle_exact": exact / repeats,
                       "mean_width": width / repeats}
    return found


def stop_bounds(model: MechanismModel) -> list[dict]:
    """Per reference controller (as the truth), its nearest rival at the one configuration
    that separates them best, and the episodes a sequential test needs on average to move the
    odds from the prior's to STOP_POSTERIOR's there (Wald: log odds / KL per episode) if it
    played nothing else and the rival were the only one: a lower bound on the mean episodes
    any design over this battery spends."""
    prior = ranking_scores(model, np.zeros(len(model.mechanisms)))
    odds = float(np.log(STOP_POSTERIOR / (1 - STOP_POSTERIOR)))
    out = []
    for name in CONTROLLER_NAMES:
        t = model.index[name]
        best = []
        for r in range(len(model.mechanisms)):
            if r != t:
                separation = max(float(np.exp(log_p[t]) @ (log_p[t] - log_p[r]))
                                 for log_p in model.log_p)
                best.append((separation, r))
        separation, r = min(best)
        needed = odds + float(prior[r] - prior[t])
        out.append({"controller": name, "rival": model.mechanisms[r].name,
                    "nats_per_episode": round(separation, 4),
                    "log_odds_needed": round(needed, 2),
                    "episodes": round(needed / separation, 1)})
    return out


def weakest_pairs(model: MechanismModel, count: int = 5) -> list[dict]:
    shares = np.array(allocate(DEFAULT_SHARES)) / DEFAULT_BUDGET
    kl = sum(w * kl_matrix(log_p) for w, log_p in zip(shares, model.log_p, strict=True))
    truths = {model.index[name] for name in CONTROLLER_NAMES}
    pairs = sorted((float(kl[i, j]), model.mechanisms[i].name, model.mechanisms[j].name)
                   for i in truths for j in range(len(model.mechanisms)) if i != j)
    return [{"true": t, "alternative": a, "nats_per_episode": round(v, 4)}
            for v, t, a in pairs[:count]]


def print_adaptive(rows: list[dict], adaptive: dict[str, dict], needed: int | None) -> None:
    """The efficiency curve (fixed rows beside each rule's, by budget or cap), the stops'
    episodes and the reliability of their claims."""
    print(f"{'budget':>7} {'fixed':>6} {'worst':>6} " + " ".join(
        f"{name:>12} {'worst':>6}" for name in adaptive) + "  worst controller")
    for r in rows:
        cells = []
        for found in adaptive.values():
            a = next((x for x in found["rows"] if x["budget"] == r["budget"]), None)
            cells.append(f"{'-':>12} {'-':>6}" if a is None else
                         f"{a['overall_rate']:>12.3f} {a['worst_rate']:>6.3f}")
        print(f"{r['budget']:>7} {r['overall_rate']:>6.3f} {r['worst_rate']:>6.3f} "
              + " ".join(cells) + f"  {r['worst']}")
    print(f"needed for {TARGET:.0%} top-1 of every controller: fixed {needed} episodes; "
          + ", ".join(f"{n} {a['needed']} (cap)" for n, a in adaptive.items()))
    for name, found in adaptive.items():
        stop = found["episodes_at_stop"]
        print(f"{name}: stops after a median of {stop['median']:g} episodes (max "
              f"{stop['max']}), top-1 right at the stop in {found['right_at_stop']:.3f}; "
              f"{found['seconds_per_run']:.2f} s per run")
        for b in found["reliability"]:
            print(f"  claimed {b['claimed']:>11}: {b['runs']:>4} stops, mean claimed "
                  f"{b['mean_claimed']:.4f}, observed {b['observed']:.4f}")

    for name, found in adaptive.items():
        for agent, stop in found.get("failure_mode_agents", {}).items():
            print(f"  {name} on {agent}: median {stop['median']:g} episodes, leader right in "
                  f"{stop['leader_right']:.3f}")
        for b in found.get("failure_mode_reliability", []):
            print(f"  {name} on the failure-mode agents, claimed {b['claimed']:>11}: "
                  f"{b['runs']:>4} stops, mean claimed {b['mean_claimed']:.4f}, observed "
                  f"{b['observed']:.4f}")


def adaptive_only(args: argparse.Namespace, repeats: int) -> None:
    """--adaptive-only: the efficiency curve at --adaptive-cap for --rules (the fixed rows
    up to the cap), the stops on the failure-mode agents, and the stop bounds."""
    names = args.rules.split(",") if args.rules else list(RULES)
    model = cached_model(DEFAULT_BATTERY)
    rows = fixed_rows(model, repeats, [b for b in BUDGETS if b <= args.adaptive_cap])[0]
    adaptive = {}
    for name in names:
        found = adaptive_rows(model, RULES[name], repeats, args.adaptive_cap)
        modes = adaptive_rows(model, RULES[name], repeats, args.adaptive_cap,
                              FAILURE_MODE_AGENTS)
        found["failure_mode_agents"] = {
            a: {"median": m, "leader_right": modes["leader_right_by_agent"][a]}
            for a, m in modes["episodes_at_stop"]["per_controller_median"].items()}
        found["failure_mode_reliability"] = modes["reliability"]
        adaptive[name] = found
    needed = next((r["budget"] for r in rows if r["worst_rate"] >= TARGET), None)
    print_adaptive(rows, adaptive, needed)
    bounds = stop_bounds(model)
    print("stop bounds: controller | nearest rival | nats per episode at its best "
          "configuration | log odds to move | episodes (Wald)")
    for b in bounds:
        print(f"  {b['controller']:<18} {b['rival']:<22} {b['nats_per_episode']:.4f} "
              f"{b['log_odds_needed']:.2f} {b['episodes']:g}")
    print(f"  median over the 19: {np.median([b['episodes'] for b in bounds]):g} episodes")
    emit({"quick": args.quick, "repeats": repeats, "adaptive_cap": args.adaptive_cap,
          "rows": rows, "needed": needed, "adaptive": adaptive, "stop_bounds": bounds},
         args.json_out)


def fixed_rows(model: MechanismModel, repeats: int, budgets: list[int]
               ) -> tuple[list[dict], dict[str, int], float]:
    """The fixed battery's top-1 by budget: rows, the misses at the default budget and the
    seconds spent fitting."""
    rows, confusion = [], {}
    fit_seconds = 0.0
    for budget in budgets:
        rates = {}
        for name in CONTROLLER_NAMES:
            hits = 0
            for repeat in range(repeats):
                start = time.perf_counter()
                ok, top = identified(model, name, budget, repeat)
                fit_seconds += time.perf_counter() - start
                hits += ok
                if budget == DEFAULT_BUDGET and not ok:
                    confusion[f"{name} -> {top}"] = confusion.get(f"{name} -> {top}", 0) + 1
            rates[name] = hits / repeats
        worst = min(rates, key=rates.get)
        rows.append({"budget": budget, "worst": worst, "worst_rate": rates[worst],
                     "overall_rate": round(float(np.mean(list(rates.values()))), 4)})
    return rows, confusion, fit_seconds


SUMMARY_SEEDS = (0, 1000)
SUMMARY_ADAPTIVE_BUDGET = DEFAULT_BUDGET


def _summary_agents() -> list[tuple[str, Any, str, str]]:
    """(agent, make_policy, truth, where) for the summary: the 19 reference controllers (in
    the family, each its own truth) and every held-out agent (tests/analysis/heldout_agents.py:
    lapsing controllers and failure-mode agents in the family, three outside it)."""
    from diagym.controllers.workflow.adapter import ReferencePolicy
    from tests.analysis.heldout_agents import HELD_OUT, OUTSIDE_FAMILY

    agents = [(name, lambda env, name=name: ReferencePolicy.for_env(name, env), name,
               "in family") for name in CONTROLLER_NAMES]
    for agent, (cls, truth, where) in HELD_OUT.items():
        agents.append((agent, lambda env, cls=cls: cls(env), truth,
                       "outside" if where == OUTSIDE_FAMILY else "in family"))
    return agents


def _named_right(diagnosis: Any, truth: str) -> bool:
    """The diagnosis's best fit is the truth: a controller by name or play alias; a held-out
    in-family agent by its mechanism (the part before "@", a failure mode by its prefix; a
    mixture agent by the reported mixture)."""
    top = diagnosis.ranked[0]
    base = truth.split("@")[0]
    if truth == "mixture":
        return diagnosis.mixture is not None
    return base in top.names or top.mechanism.name.startswith(base)


def _flagged(diagnosis: Any) -> bool:
    """The diagnosis says the agent is not a fitting family member: the fit test rejects it,
    or the failure check says its failures do not fit, or it found nothing to fit."""
    failures = getattr(diagnosis, "failures", None)
    return bool((diagnosis.fit is not None and diagnosis.fit.rejected)
                or (failures is not None and failures.rejected)
                or diagnosis.fit is None)


def summary(model: MechanismModel, coverage_runs: int, forecast_repeats: int) -> dict:
    """Issue 37's table, for the fixed battery and the adaptive design: in-family agents
    named right and falsely flagged, outside agents flagged, median episodes and seconds per
    diagnosis (each agent on SUMMARY_SEEDS, played through the env by diagnose_policy), with
    the fixed battery's lapse-interval and forecast coverage."""
    designs: dict[str, dict[str, Any]] = {}
    for design, budget in (("fixed", None), ("adaptive", SUMMARY_ADAPTIVE_BUDGET)):
        rows = []
        for agent, make, truth, where in _summary_agents():
            for seed in SUMMARY_SEEDS:
                start = time.perf_counter()
                diagnosis = diagnose_policy(make, seed=seed, adaptive_budget=budget)
                rows.append({"agent": agent, "where": where, "seed": seed,
                             "right": _named_right(diagnosis, truth),
                             "flagged": _flagged(diagnosis),
                             "episodes": diagnosis.evidence.episodes,
                             "seconds": time.perf_counter() - start})
            print(f"  {design:<8} {agent:<28} {sum(r['right'] for r in rows[-2:])}/2 right, "
                  f"{sum(r['flagged'] for r in rows[-2:])}/2 flagged", flush=True)
        inside = [r for r in rows if r["where"] == "in family"]
        outside = [r for r in rows if r["where"] == "outside"]
        designs[design] = {
            "in_family_right": [sum(r["right"] for r in inside), len(inside)],
            "false_flags": [sum(r["flagged"] for r in inside), len(inside)],
            "outside_flagged": [sum(r["flagged"] for r in outside), len(outside)],
            "median_episodes": float(np.median([r["episodes"] for r in rows])),
            "median_seconds": round(float(np.median([r["seconds"] for r in rows])), 2),
            "rows": rows}
    coverage = interval_coverage(model, coverage_runs)
    forecasts = forecast_error(model, forecast_repeats)
    return {"designs": designs, "interval_coverage": coverage, "forecast": forecasts}


def print_summary(found: dict) -> None:
    coverage, forecasts = found["interval_coverage"], found["forecast"]
    print(f"{'design':<9} {'in-family right':>16} {'false flags':>12} {'outside flagged':>16} "
          f"{'median episodes':>16} {'median s':>9}")
    for design, d in found["designs"].items():
        print(f"{design:<9} {d['in_family_right'][0]:>9}/{d['in_family_right'][1]:<6} "
              f"{d['false_flags'][0]:>6}/{d['false_flags'][1]:<5} "
              f"{d['outside_flagged'][0]:>9}/{d['outside_flagged'][1]:<6} "
              f"{d['median_episodes']:>16.0f} {d['median_seconds']:>9.2f}")
    print(f"fixed battery: lapse-interval coverage {json.dumps(coverage, default=str)[:300]}")
    print(f"fixed battery: forecasts inside their interval {forecasts['inside_interval']} "
          f"(in support {forecasts['in_support']['inside_interval']}, extrapolated "
          f"{forecasts['extrapolated']['inside_interval']})")


def only_rows(args: argparse.Namespace) -> None:
    """One subset of the rows (--only), for a run that must fit a loaded machine."""
    model = cached_model(DEFAULT_BATTERY)
    if args.only == "summary":
        found = summary(model, COVERAGE_RUNS, max(1, args.repeats // 4))
        print_summary(found)
        emit({"only": "summary", "seeds": SUMMARY_SEEDS,
              "adaptive_budget": SUMMARY_ADAPTIVE_BUDGET, **found}, args.json_out)
        return
    if args.only == "coverage":
        found = interval_coverage(model)
        print_coverage(found)
        if args.full_runs:
            full = full_interval_coverage(model, args.full_runs)
            found["full"] = full
            print(f"interval coverage, {full['agent']} (played through the env): "
                  f"{full['held']} of {full['runs']} ({full['rate']:.3f}, 95% "
                  f"{full['interval'][0]:.3f}..{full['interval'][1]:.3f}), "
                  f"{full['seconds_per_diagnosis']} s per diagnosis")
        emit({"only": "coverage", "interval_coverage": found}, args.json_out)
        return
    if args.only == "forecast":
        found = forecast_error(model, max(1, args.repeats // 4))
        print(f"forecasts on {found['configurations']} held-out configurations "
              f"({found['forecasts']}): mean |predicted - observed| "
              f"{found['mean_abs_error']:.4f} (max {found['max_abs_error']:.4f}), observed "
              f"inside the interval {found['inside_interval']:.3f} (in support "
              f"{found['in_support']['inside_interval']}, extrapolated "
              f"{found['extrapolated']['inside_interval']})")
        emit({"only": "forecast", "repeats": args.repeats, "forecast": found}, args.json_out)
        return
    if args.only == "honesty":
        lapse = lapse_recovery(model, args.repeats)
        for r in lapse:
            print(f"  {r['agent']:<12} {r['top_right']:.3f} {r['interval_holds']:.3f} "
                  f"{r['both']:.3f}", flush=True)
        controllers = controller_fit_tests(model, max(1, args.repeats // 4))
        print(f"fit test on the 19 controllers: {controllers['rejected']} of "
              f"{controllers['runs']} rejected at p < {REJECT_BELOW}")
        emit({"only": "honesty", "repeats": args.repeats, "lapse_recovery": lapse,
              "fit_test_controllers": controllers}, args.json_out)
        return
    repeats = 4 if args.quick else args.repeats
    rows, confusion, fit_seconds = fixed_rows(model, repeats, list(BUDGETS))
    needed = next((r["budget"] for r in rows if r["worst_rate"] >= TARGET), None)
    print(f"{'budget':>7} {'fixed':>6} {'worst':>6}  worst controller")
    for r in rows:
        print(f"{r['budget']:>7} {r['overall_rate']:>6.3f} {r['worst_rate']:>6.3f}  {r['worst']}")
    print(f"needed for {TARGET:.0%} top-1 of every controller: fixed {needed} episodes")
    print(f"misses at the default budget: {confusion or 'none'}")
    emit({"battery": [spec.as_dict() for spec in DEFAULT_BATTERY], "only": "fixed",
          "repeats": repeats, "rows": rows, "needed": needed,
          "misses_at_default_budget": confusion, "weakest_pairs": weakest_pairs(model),
          "recovery_at_default_budget": recovery(model, repeats),
          "model": {"distinct_mechanisms": len(model.mechanisms),
                    "hypothesis_names": len(model.index)},
          "seconds_per_agent_fit": round(fit_seconds / (len(BUDGETS) * repeats
                                                        * len(CONTROLLER_NAMES)), 5)},
         args.json_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40,
                        help="runs per controller and budget (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a few minutes: 4 repeats, 2 for the fit tests and forecasts, "
                             "held-out agents on one seed (default: the full run)")
    parser.add_argument("--held-out-only", action="store_true",
                        help="only the held-out agents' table, on task seeds 0 and 1000 "
                             "(default: every row)")
    parser.add_argument("--adaptive-only", action="store_true",
                        help="only the efficiency curve (fixed and adaptive up to "
                             "--adaptive-cap), the failure-mode agents' stops and the stop "
                             "bounds (default: every row)")
    parser.add_argument("--adaptive-cap", type=int, default=ADAPTIVE_CAP,
                        help="the adaptive design's budget with --adaptive-only "
                             "(default: %(default)s)")
    parser.add_argument("--rules", default="",
                        help="comma-separated adaptive rules with --adaptive-only, of "
                             f"{', '.join(RULES)} (default: all)")
    parser.add_argument("--full-runs", type=int, default=COVERAGE_RUNS,
                        help="with --only coverage: full diagnoses played through the env "
                             "(0: the simulated coverage only)")
    parser.add_argument("--only", choices=("fixed", "honesty", "forecast", "coverage",
                                           "summary"),
                        default=None,
                        help="only some rows: fixed (top-1 by budget, the misses at the "
                             "default budget, the weakest pairs, the family recovery), honesty "
                             "(the lapse recovery, --repeats runs, and the fit test on the 19 "
                             "controllers, --repeats / 4), forecast (the forecast error, "
                             "--repeats / 4 runs per agent), summary (issue 37's table: every "
                             "controller and held-out agent diagnosed through the env on seeds "
                             "0 and 1000 by both designs, with the fixed battery's coverage) "
                             "(default: every row)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    if args.only is not None:
        only_rows(args)
        return
    if args.held_out_only:
        found = held_out_fit_tests((0, 1000))
        print(f"{'agent':<26} {'where':<13} {'seed':>5} {'top':<26} {'mixture':<30} "
              f"{'fit p':>6}  verdict")
        for r in found["rows"]:
            mixture = " + ".join(r["mixture"]) if r["mixture"] else "-"
            print(f"{r['agent']:<26} {r['where']:<13} {r['seed']:>5} {r['top']:<26} "
                  f"{mixture:<30} {r['p_value']:>6.4f}  {r['verdict']}")
        print(json.dumps(found))
        if args.json_out:
            args.json_out.write_text(json.dumps(found, indent=2) + "\n")
        return
    repeats = 4 if args.quick else args.repeats
    if args.adaptive_only:
        unknown = [n for n in args.rules.split(",") if args.rules and n not in RULES]
        if unknown:
            parser.error(f"--rules: {', '.join(unknown)} is not one of {', '.join(RULES)}")
        adaptive_only(args, repeats)
        return
    test_repeats = 2 if args.quick else max(1, args.repeats // 4)
    held_out_seeds = (0,) if args.quick else (0, 1000, 2000)

    start = time.perf_counter()
    model = cached_model(DEFAULT_BATTERY)
    build_seconds = time.perf_counter() - start
    simulated = len(hypotheses()[0]) * len(DEFAULT_BATTERY) * model.simulations

    rows, confusion, fit_seconds = fixed_rows(model, repeats, list(BUDGETS))
    needed = next((r["budget"] for r in rows if r["worst_rate"] >= TARGET), None)

    adaptive = {name: adaptive_rows(model, rule, repeats) for name, rule in RULES.items()}

    print_adaptive(rows, adaptive, needed)
    lapse = lapse_recovery(model, repeats)
    print("lapse recovery (default budget): agent | top right | interval holds | both")
    for r in lapse:
        print(f"  {r['agent']:<12} {r['top_right']:.3f} {r['interval_holds']:.3f} "
              f"{r['both']:.3f}")
    controllers = controller_fit_tests(model, test_repeats)
    print(f"fit test on the 19 controllers: {controllers['rejected']} of {controllers['runs']} "
          f"rejected at p < {REJECT_BELOW} ({controllers['rate']:.3f}, 95% "
          f"{controllers['interval'][0]:.3f}..{controllers['interval'][1]:.3f})")
    start = time.perf_counter()
    held_out = held_out_fit_tests(held_out_seeds)
    held_out_seconds = time.perf_counter() - start
    print("held-out agents: agent | truth | seed | top | fit p | verdict")
    for r in held_out["rows"]:
        print(f"  {r['agent']:<24} {r['truth']:<34} {r['seed']:>5} {r['top']:<24} "
              f"{r['p_value']:.4f} {r['verdict']}")
    for key in ("outside", "inside_with_lapse"):
        h = held_out[key]
        print(f"  {key}: {h['rejected']} of {h['runs']} rejected ({h['rate']:.3f})")
    coverage = interval_coverage(model)
    print_coverage(coverage)
    forecasts = forecast_error(model, test_repeats)
    print(f"forecasts on {forecasts['configurations']} held-out configurations "
          f"({forecasts['forecasts']}): mean |predicted - observed| "
          f"{forecasts['mean_abs_error']:.4f} (max {forecasts['max_abs_error']:.4f}), "
          f"observed inside the interval {forecasts['inside_interval']:.3f} (in support "
          f"{forecasts['in_support']['inside_interval']}, extrapolated "
          f"{forecasts['extrapolated']['inside_interval']})")
    emit({
        "battery": [spec.as_dict() for spec in DEFAULT_BATTERY],
        "quick": args.quick,
        "repeats": repeats,
        "rows": rows,
        "needed": needed,
        "misses_at_default_budget": confusion,
        "adaptive": adaptive,
        "weakest_pairs": weakest_pairs(model),
        "recovery_at_default_budget": recovery(model, repeats),
        "lapse_recovery": lapse,
        "fit_test_controllers": controllers,
        "fit_test_held_out": held_out,
        "held_out_seconds_per_diagnosis": round(held_out_seconds / len(held_out["rows"]), 2),
        "interval_coverage": coverage,
        "forecast": forecasts,
        "model": {"distinct_mechanisms": len(model.mechanisms), "hypothesis_names":
                  len(model.index), "simulated_episodes": simulated,
                  "load_or_build_seconds": round(build_seconds, 2)},
        "seconds_per_agent_fit": round(fit_seconds / (len(BUDGETS) * repeats
                                                      * len(CONTROLLER_NAMES)), 5),
    }, args.json_out)


if __name__ == "__main__":
    main()
