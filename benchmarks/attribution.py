"""diagym's per-decision attribution against exact labels: fault-injected episodes of the exact
controller (analysis/diagnose/faults.py) on six battery configurations, every failure with its
decisive step and cause, scored by analysis/studies/attribution_bench.

Plays `--episodes` task seeds per configuration (the seven causes in turn), writes them to a
run log with traces and labels (kept with `--log`, resumable with `--resume`), checks every
label against the env's outcomes (the run fails on a violation), and prints the tables, then
the JSON (step and cause accuracy with Wilson 95% intervals, Cohen's kappa with a bootstrap
interval, per cause and per configuration, the confusion matrix, the guess chance).

    python benchmarks/attribution.py [--episodes 280] [--log FILE] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

from diagym.analysis.studies.attribution_bench.design import BenchDesign  # noqa: E402
from diagym.analysis.studies.attribution_bench.report import score, table  # noqa: E402
from diagym.analysis.studies.attribution_bench.run import cases, play  # noqa: E402
from diagym.controllers.provenance import provenance  # noqa: E402

EPISODES = 280


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=EPISODES,
                        help="task seeds per configuration")
    parser.add_argument("--log", type=Path, help="keep the run log here")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    design = BenchDesign(episodes=args.episodes)
    with tempfile.TemporaryDirectory(prefix="diagym-attribution-") as scratch:
        log = args.log or Path(scratch) / "attribution.jsonl"
        start = time.perf_counter()
        play(design, log, resume=args.resume)
        played = time.perf_counter() - start
        start = time.perf_counter()
        result = score(cases(log))
        scored = time.perf_counter() - start
    if result["check_failures"]:
        print("\n".join(result["check_failures"][:20]), file=sys.stderr)
        raise SystemExit(f"{len(result['check_failures'])} labels are not exact")
    print(table(result))
    print()
    emit({"design": {"configurations": [s.as_dict() for s in design.configurations],
                     "episodes_per_configuration": design.episodes, "seed": design.seed,
                     "base": design.base, "causes": list(design.causes)},
          **result, "seconds": {"play": round(played, 2), "score": round(scored, 2)},
          "provenance": provenance()}, args.json_out)


if __name__ == "__main__":
    main()
