"""The honest DACS diagnosis on agents it was never shown: per held-out agent
(tests/analysis/dacs_agents.py) and battery seed, the hypothesis it settles on, the fit test's
p-value and verdict; then, over `--seeds` battery seeds, how often the fit test rejects each
held-out agent and each reference reader played itself (the false rejections, which should be
about FIT_ALPHA = 1%).

`--replicate-cost` measures instead what the fit test's choice of replicate costs: one
replicate played on fresh scenario seeds (the battery played by dacs-reader, the hypothesis a
fitting dacs-reader gets, and its windows replayed and parsed as the agent's are), against
the whole fit test of REPLICATES replicates redrawn on the agent's own windows
(analysis/diagnose/dacs/fit.py; docs/DEPARTURES.md says why the test redraws).

    python benchmarks/dacs_honesty.py [--seeds 10] [--table-seeds 0 1000] [--agents NAME ...]
                                      [--json-out FILE]
    python benchmarks/dacs_honesty.py --replicate-cost [--json-out FILE]
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

from diagym.analysis.diagnose.dacs import diagnosis as dacs_diagnosis  # noqa: E402
from diagym.analysis.diagnose.dacs import fit as dacs_fit  # noqa: E402
from diagym.analysis.diagnose.dacs import replay as dacs_replay  # noqa: E402
from diagym.analysis.diagnose.fit_test import REPLICATES  # noqa: E402
from diagym.analysis.diagnose.honesty import FIT_ALPHA  # noqa: E402
from diagym.controllers.dacs.readers import dacs_controller  # noqa: E402
from tests.analysis.dacs_agents import HELD_OUT  # noqa: E402

SEED_STEP = 100


def replicate_cost(repeats: int = 3) -> dict[str, float]:
    """Median seconds of one fresh-seed replicate (play the battery, replay its windows) and
    of the own-window fit test on the same traces, over `repeats` battery seeds."""
    fresh, own = [], []
    for repeat in range(repeats):
        start = time.perf_counter()
        traces = dacs_replay.play_battery(dacs_controller("dacs-reader"), seed=SEED_STEP * repeat)
        decisions = [(dict(t.env_kwargs), dacs_replay.replay(t)) for t in traces]
        fresh.append(time.perf_counter() - start)
        per_configuration = [(kwargs, [d for k, group in decisions if k == dict(kwargs)
                                       for d in group]) for kwargs in dacs_replay.DEFAULT_BATTERY]
        start = time.perf_counter()
        dacs_fit.fit_test(per_configuration, dacs_fit.DacsHypothesis("dacs-reader", 0.0, 0.0))
        own.append(time.perf_counter() - start)
    one, test = float(np.median(fresh)), float(np.median(own))
    print(f"one fresh-seed replicate (32 episodes played and replayed): {one:.2f} s; "
          f"{REPLICATES} of them {one * REPLICATES:.0f} s; the own-window fit test of "
          f"{REPLICATES}: {test:.3f} s (ratio {one * REPLICATES / test:.0f})")
    return {"fresh_replicate_seconds": round(one, 3),
            "fresh_test_seconds": round(one * REPLICATES, 1),
            "own_window_test_seconds": round(test, 4), "replicates": REPLICATES,
            "ratio": round(one * REPLICATES / test, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10,
                        help="battery seeds 0, 100, ... for the rejection rates (default 10)")
    parser.add_argument("--table-seeds", type=int, nargs="*", default=[0, 1000],
                        help="battery seeds of the per-agent table (default 0 1000)")
    parser.add_argument("--json-out", type=Path, default=None,
                        help="also write the JSON there (default: print only)")
    parser.add_argument("--agents", nargs="*", default=None,
                        help="only these agents (held-out names, or 'reader NAME'; "
                             "default: every one)")
    parser.add_argument("--replicate-cost", action="store_true",
                        help="time one fresh-seed replicate against the own-window fit test "
                             "(default: the rejection tables)")
    args = parser.parse_args()
    if args.replicate_cost:
        emit(replicate_cost(), args.json_out)
        return
    started = time.perf_counter()
    print("| agent | truth | seed | top | fit p | verdict |")
    print("| --- | --- | ---: | --- | ---: | --- |")
    table = []
    chosen = None if args.agents is None else set(args.agents)
    for name, (make, truth, _) in HELD_OUT.items():
        if chosen is not None and name not in chosen:
            continue
        for seed in args.table_seeds:
            result = dacs_diagnosis.diagnosis(dacs_replay.play_battery(make(), seed=seed))
            fit = result["fit"]
            table.append({"agent": name, "truth": truth, "seed": seed,
                          "top": result["hypothesis"]["name"], "p_value": fit["p_value"],
                          "verdict": fit["verdict"], "mixture": result["mixture"]})
            print(f"| {name} | {truth} | {seed} | {result['hypothesis']['name']} | "
                  f"{fit['p_value']:.2g} | {fit['verdict']} |", flush=True)
    agents = {**{f"reader {r}": (lambda r=r: dacs_controller(r), True)
                 for r in dacs_fit.READERS if r != "flat-reader"},
              **{name: (make, inside) for name, (make, _, inside) in HELD_OUT.items()}}
    print(f"\n| agent | inside | rejected of {args.seeds} | smallest p | mixture reported |")
    print("| --- | --- | ---: | ---: | ---: |")
    rates = []
    for name, (make, inside) in agents.items():
        if chosen is not None and name not in chosen:
            continue
        found = [dacs_diagnosis.diagnosis(dacs_replay.play_battery(make(), seed=SEED_STEP * s))
                 for s in range(args.seeds)]
        ps = [r["fit"]["p_value"] for r in found]
        mixtures = sum(r["mixture"] is not None for r in found)
        rejected = sum(p < FIT_ALPHA for p in ps)
        rates.append({"agent": name, "inside": inside, "rejected": rejected,
                      "runs": args.seeds, "smallest_p": min(ps), "mixtures": mixtures})
        print(f"| {name} | {'yes' if inside else 'no'} | {rejected} | {min(ps):.2g} | "
              f"{mixtures} |", flush=True)
    emit({"table": table, "rejection": rates,
          "seconds": round(time.perf_counter() - started, 1)}, args.json_out)


if __name__ == "__main__":
    main()
