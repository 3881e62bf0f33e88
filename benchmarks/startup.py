"""Start-up of the command line and the stages of the main job (`make demo`'s study).

- `diagym --help`, `diagym --version` and an argument error (`run --epsiodes 5`), each a
  fresh `python -m analysis.cli` process (what a user waits for; median of repeats; none of
  them imports numba, gymnasium or the controllers: tests/analysis/test_cli_lazy_imports.py);
- `reproduce --grid all` with a warm compile cache, per stage as reproduce times them (run
  and predict, statistics and tables, plots), and the sha256 of its results.csv, which must
  not change when the stages get faster. The machine's load average is recorded beside the
  figures: on a shared machine they are comparable only at a like load.

    python benchmarks/startup.py [--repeats 5] [--study-repeats 1] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

RESULTS_SHA256 = "1d1147238e0446ce7159eb57a0e6624a3141c5f3b6befc4e8277063ecbaa3a5c"
COMMANDS = {
    "diagym --help": ["--help"],
    "diagym --version": ["--version"],
    "diagym run --epsiodes 5 (error)": ["run", "--env", "StatefulWorkflow-v0", "--policy",
                                        "cache-2", "--epsiodes", "5"],
}


def command_seconds(argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "analysis.cli", *argv], cwd=ROOT,
                       capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--study-repeats", type=int, default=1)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)

    startup = {name: command_seconds(cmd, args.repeats) for name, cmd in COMMANDS.items()}
    from analysis.studies.reproduce.run import reproduce

    stages: dict[str, list[float]] = {}
    walls = []
    with tempfile.TemporaryDirectory() as out:
        reproduce("all", Path(out))  # warm-up: compile cache, imports, font cache
        for _ in range(args.study_repeats):
            start = time.perf_counter()
            result = reproduce("all", Path(out))
            walls.append(time.perf_counter() - start)
            for name, value in result.seconds.items():
                stages.setdefault(name, []).append(value)
        digest = hashlib.sha256(result.results_csv.read_bytes()).hexdigest()

    print(f"{'stage':<40} {'seconds':>8}")
    for name, value in startup.items():
        print(f"{name:<40} {value:>8.2f}")
    for name, values in stages.items():
        print(f"{'reproduce: ' + name:<40} {statistics.median(values):>8.2f}")
    print(f"{'reproduce --grid all (whole)':<40} {statistics.median(walls):>8.2f}")
    print(f"results.csv sha256 {digest} ({'unchanged' if digest == RESULTS_SHA256 else 'CHANGED'})")
    emit({"repeats": args.repeats, "study_repeats": args.study_repeats,
          "load_average_1min": os.getloadavg()[0],
          "startup_seconds": startup,
          "reproduce_stage_seconds": {k: statistics.median(v) for k, v in stages.items()},
          "reproduce_seconds": statistics.median(walls),
          "results_csv_sha256": digest, "results_csv_unchanged": digest == RESULTS_SHA256},
         args.json_out)
    return 0 if digest == RESULTS_SHA256 else 1


if __name__ == "__main__":
    raise SystemExit(main())
