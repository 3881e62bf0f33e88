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

    python benchmarks/diagnose.py [--repeats 40] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from analysis.diagnose.adaptive import run_design  # noqa: E402
from analysis.diagnose.battery import (  # noqa: E402
    DEFAULT_BATTERY,
    DEFAULT_BUDGET,
    DEFAULT_SHARES,
    allocate,
    kl_matrix,
)
from analysis.diagnose.hypotheses import families, hypotheses  # noqa: E402
from analysis.diagnose.likelihood import (  # noqa: E402
    SIMULATION_SEED,
    MechanismModel,
    build_model,
    count_outcomes,
    fit,
    fit_family,
    outcome_count,
    simulate_codes,
)
from controllers.workflow.batched import episode_columns  # noqa: E402
from controllers.workflow.mechanisms import CONTROLLER_NAMES  # noqa: E402

BUDGETS = (64, 128, 256, 512, 1024, 2048)
TARGET = 0.95


def agent_seeds(repeat: int, c: int, first: int, episodes: int) -> np.ndarray:
    """Task seeds of an agent's episodes first.. of battery configuration c in one repeat."""
    seeds = 10**7 + repeat * 10**5 + c * 10**4 + first + np.arange(episodes, dtype=np.int64)
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


def adaptive_run(model: MechanismModel, name: str, repeat: int, caps: tuple[int, ...]
                 ) -> tuple[dict[int, bool], int, bool]:
    """({cap: top-1 right}, episodes played before the stop rule, top-1 right at the stop)."""
    counts = [np.zeros(outcome_count(spec), dtype=np.int64) for spec in DEFAULT_BATTERY]
    used = [0] * len(DEFAULT_BATTERY)
    snapshots: list[tuple[int, list[np.ndarray]]] = [(0, [c.copy() for c in counts])]

    def play_round(c: int, episodes: int) -> np.ndarray:
        spec = DEFAULT_BATTERY[c]
        columns = episode_columns(spec, name, agent_seeds(repeat, c, used[c], episodes))[0]
        counts[c] = counts[c] + count_outcomes(spec, columns)
        used[c] += episodes
        snapshots.append((sum(used), [x.copy() for x in counts]))
        return counts[c]

    run_design(model, max(caps), play_round)
    right = {}
    for cap in caps:
        state = [s for played, s in snapshots if played <= cap][-1]
        right[cap] = name in fit(model, state)[0].names
    return right, sum(used), name in fit(model, counts)[0].names


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
            counts = [np.bincount(simulate_codes(spec, member.row, 10**7 + repeat * 10**5
                                                 + c * 10**4 + np.arange(n, dtype=np.int64)),
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


def weakest_pairs(model: MechanismModel, count: int = 5) -> list[dict]:
    shares = np.array(allocate(DEFAULT_SHARES)) / DEFAULT_BUDGET
    kl = sum(w * kl_matrix(log_p) for w, log_p in zip(shares, model.log_p, strict=True))
    truths = {model.index[name] for name in CONTROLLER_NAMES}
    pairs = sorted((float(kl[i, j]), model.mechanisms[i].name, model.mechanisms[j].name)
                   for i in truths for j in range(len(model.mechanisms)) if i != j)
    return [{"true": t, "alternative": a, "nats_per_episode": round(v, 4)}
            for v, t, a in pairs[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    start = time.perf_counter()
    model = build_model(DEFAULT_BATTERY)
    build_seconds = time.perf_counter() - start
    simulated = len(hypotheses()[0]) * len(DEFAULT_BATTERY) * model.simulations

    rows, confusion = [], {}
    fit_seconds = 0.0
    for budget in BUDGETS:
        rates = {}
        for name in CONTROLLER_NAMES:
            hits = 0
            for repeat in range(args.repeats):
                start = time.perf_counter()
                ok, top = identified(model, name, budget, repeat)
                fit_seconds += time.perf_counter() - start
                hits += ok
                if budget == DEFAULT_BUDGET and not ok:
                    confusion[f"{name} -> {top}"] = confusion.get(f"{name} -> {top}", 0) + 1
            rates[name] = hits / args.repeats
        worst = min(rates, key=rates.get)
        rows.append({"budget": budget, "worst": worst, "worst_rate": rates[worst],
                     "overall_rate": round(float(np.mean(list(rates.values()))), 4)})
    needed = next((r["budget"] for r in rows if r["worst_rate"] >= TARGET), None)

    start = time.perf_counter()
    adaptive_rates: dict[int, dict[str, float]] = {b: {} for b in BUDGETS}
    stops: dict[str, list[int]] = {}
    right_at_stop = 0
    for name in CONTROLLER_NAMES:
        hits = dict.fromkeys(BUDGETS, 0)
        for repeat in range(args.repeats):
            right, played, ok = adaptive_run(model, name, repeat, BUDGETS)
            for b in BUDGETS:
                hits[b] += right[b]
            stops.setdefault(name, []).append(played)
            right_at_stop += ok
        for b in BUDGETS:
            adaptive_rates[b][name] = hits[b] / args.repeats
    adaptive_seconds = time.perf_counter() - start
    adaptive_rows = []
    for b in BUDGETS:
        rates = adaptive_rates[b]
        worst = min(rates, key=rates.get)
        adaptive_rows.append({"budget": b, "worst": worst, "worst_rate": rates[worst],
                              "overall_rate": round(float(np.mean(list(rates.values()))), 4)})
    adaptive_needed = next((r["budget"] for r in adaptive_rows
                            if r["worst_rate"] >= TARGET), None)
    all_stops = [n for runs in stops.values() for n in runs]

    print(f"{'budget':>7} {'fixed':>6} {'worst':>6} {'adaptive':>9} {'worst':>6}  "
          "worst controller (fixed / adaptive)")
    for r, a in zip(rows, adaptive_rows, strict=True):
        print(f"{r['budget']:>7} {r['overall_rate']:>6.3f} {r['worst_rate']:>6.3f} "
              f"{a['overall_rate']:>9.3f} {a['worst_rate']:>6.3f}  {r['worst']} / {a['worst']}")
    print(f"needed for {TARGET:.0%} top-1 of every controller: fixed {needed} episodes, "
          f"adaptive {adaptive_needed} (cap)")
    print(f"adaptive stop rule: median {int(np.median(all_stops))} episodes "
          f"(max {max(all_stops)}), top-1 right at the stop in "
          f"{right_at_stop / len(all_stops):.3f} of runs")
    emit({
        "battery": [spec.as_dict() for spec in DEFAULT_BATTERY],
        "repeats": args.repeats,
        "rows": rows,
        "needed": needed,
        "misses_at_default_budget": confusion,
        "adaptive": {
            "rows": adaptive_rows,
            "needed": adaptive_needed,
            "episodes_at_stop": {"median": float(np.median(all_stops)), "max": max(all_stops),
                                 "per_controller_median": {n: float(np.median(v))
                                                           for n, v in stops.items()}},
            "right_at_stop": round(right_at_stop / len(all_stops), 4),
            "seconds_per_run": round(adaptive_seconds / len(all_stops), 4),
        },
        "weakest_pairs": weakest_pairs(model),
        "recovery_at_default_budget": recovery(model, args.repeats),
        "model": {"distinct_mechanisms": len(model.mechanisms), "hypothesis_names":
                  len(model.index), "simulated_episodes": simulated,
                  "build_seconds": round(build_seconds, 2)},
        "seconds_per_agent_fit": round(fit_seconds / (len(BUDGETS) * args.repeats
                                                      * len(CONTROLLER_NAMES)), 5),
    }, args.json_out)


if __name__ == "__main__":
    main()
