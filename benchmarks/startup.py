"""Start-up of the command line and the stages of the main job (`make demo`'s study).

- `diagym --help`, `diagym --version`, `run --help`, `diagnose --help` and two argument
  errors (`run --epsiodes 5`, `run --policy cache2`), each a
  fresh `python -m diagym.analysis.cli` process (what a user waits for; median of repeats; none of
  them imports numba, scipy, the env classes or the controllers' kernels:
  tests/analysis/test_cli_lazy_imports.py; gymnasium is imported, as `import diagym` registers
  the ids);
- `reproduce --grid all` with a warm compile cache, per stage as reproduce times them (run
  and predict, statistics and tables, plots), and the sha256 of its results.csv, which must
  not change when the stages get faster. The machine's load average is recorded beside the
  figures: on a shared machine they are comparable only at a like load.
- `--paired-startup TREE`: the start-up commands in this tree and in TREE, alternated
  (`--repeats` rounds), with the ratio of their medians;
- `--paired TREE`: the same `reproduce --grid all` in this tree and in another checkout TREE
  (the code before a change), each a fresh process (warm-up run, then one timed), the two
  alternated in turn for `--study-repeats` rounds, so both see the same load; medians of each
  and their ratio. Start-up commands are not timed in this mode.

    python benchmarks/startup.py [--repeats 5] [--study-repeats 1] [--json-out FILE]
    python benchmarks/startup.py --paired /path/to/old/tree --study-repeats 5
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
    "diagym run --policy cache2 (error)": ["run", "--env", "StatefulWorkflow-v0", "--policy",
                                           "cache2", "--episodes", "1"],
    "diagym run --help": ["run", "--help"],
    "diagym diagnose --help": ["diagnose", "--help"],
}


def cli_module(tree: Path) -> str:
    """The command line's module in `tree`: under diagym/, or top-level in a tree from before
    the packages moved under the one name (so --paired-startup compares across that move)."""
    return "diagym.analysis.cli" if (tree / "diagym").is_dir() else "analysis.cli"


def command_seconds(argv: list[str], repeats: int, tree: Path = ROOT) -> float:
    times = []
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", cli_module(tree), *argv], cwd=tree, env=env,
                       capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired_startup(old_tree: Path, rounds: int, json_out: Path | None) -> int:
    """Each start-up command in this tree and in `old_tree`, alternated per round (which
    goes first swaps), one fresh process each: medians and their ratio, so a shared
    machine's load shifts both trees alike."""
    trees = {"new": ROOT, "old": old_tree.resolve()}
    runs: dict[str, dict[str, list[float]]] = {"new": {}, "old": {}}
    for k in range(rounds):
        for name in (("new", "old") if k % 2 == 0 else ("old", "new")):
            for command, argv in COMMANDS.items():
                runs[name].setdefault(command, []).append(
                    command_seconds(argv, 1, trees[name]))
    medians = {name: {c: statistics.median(v) for c, v in rs.items()}
               for name, rs in runs.items()}
    print(f"{'command':<40} {'old s':>7} {'new s':>7} {'new/old':>8}")
    for command in COMMANDS:
        old, new = medians["old"][command], medians["new"][command]
        print(f"{command:<40} {old:>7.2f} {new:>7.2f} {new / old:>8.2f}")
    emit({"paired_with": str(trees["old"]), "rounds": rounds,
          "load_average_1min": os.getloadavg()[0], "seconds": runs,
          "median_seconds": medians}, json_out)
    return 0


# One timed `reproduce --grid all` after a warm-up, in a fresh process of the tree it runs in
# (its API is the same before and after the change): prints the stages, wall and digest.
ONE_STUDY = """
import hashlib, json, os, sys, tempfile, time
from pathlib import Path
from diagym.analysis.studies.reproduce.run import reproduce
with tempfile.TemporaryDirectory() as out:
    reproduce("all", Path(out))
    start = time.perf_counter()
    result = reproduce("all", Path(out))
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "stages": result.seconds,
                      "load": os.getloadavg()[0],
                      "sha256": hashlib.sha256(result.results_csv.read_bytes()).hexdigest()}))
"""


def study_in(tree: Path) -> dict:
    """One timed study in a fresh process of `tree`."""
    import json

    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", ONE_STUDY], cwd=tree, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def paired(old_tree: Path, rounds: int, json_out: Path | None) -> int:
    """This tree against `old_tree`, alternated (which goes first swaps each round)."""
    trees = {"new": ROOT, "old": old_tree.resolve()}
    runs: dict[str, list[dict]] = {"new": [], "old": []}
    for k in range(rounds):
        for name in (("new", "old") if k % 2 == 0 else ("old", "new")):
            runs[name].append(study_in(trees[name]))
            last = runs[name][-1]
            print(f"round {k + 1} {name}: {last['wall']:.2f} s at load {last['load']:.1f}",
                  flush=True)
    medians = {name: statistics.median(r["wall"] for r in rs) for name, rs in runs.items()}
    stages = {name: {stage: statistics.median(r["stages"][stage] for r in rs)
                     for stage in rs[0]["stages"]} for name, rs in runs.items()}
    print(f"{'tree':<6} {'stage':<32} {'median s':>9}")
    for name in ("old", "new"):
        for stage, value in stages[name].items():
            print(f"{name:<6} {stage:<32} {value:>9.2f}")
        print(f"{name:<6} {'whole (wall)':<32} {medians[name]:>9.2f}")
    ratio = medians["new"] / medians["old"]
    digests = {r["sha256"] for rs in runs.values() for r in rs}
    print(f"ratio new / old (whole): {ratio:.2f}; results.csv "
          f"{'unchanged' if digests == {RESULTS_SHA256} else 'CHANGED'}")
    emit({"paired_with": str(trees["old"]), "rounds": rounds,
          "load_average_1min": [r["load"] for name in ("old", "new") for r in runs[name]],
          "whole_seconds": {name: [r["wall"] for r in rs] for name, rs in runs.items()},
          "median_whole_seconds": medians, "median_stage_seconds": stages,
          "ratio_new_over_old": ratio, "results_csv_unchanged": digests == {RESULTS_SHA256}},
         json_out)
    return 0 if digests == {RESULTS_SHA256} else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--study-repeats", type=int, default=1)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--paired", type=Path, metavar="TREE",
                        help="time reproduce here and in TREE, alternated")
    parser.add_argument("--paired-startup", type=Path, metavar="TREE",
                        help="time the start-up commands here and in TREE, alternated")
    args = parser.parse_args(argv)
    if args.paired_startup is not None:
        return paired_startup(args.paired_startup, args.repeats, args.json_out)
    if args.paired is not None:
        return paired(args.paired, args.study_repeats, args.json_out)

    startup = {name: command_seconds(cmd, args.repeats) for name, cmd in COMMANDS.items()}
    from diagym.analysis.studies.reproduce.run import reproduce

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
          "reproduce_drawing_seconds": result.drawing_seconds,
          "results_csv_sha256": digest, "results_csv_unchanged": digest == RESULTS_SHA256},
         args.json_out)
    return 0 if digest == RESULTS_SHA256 else 1


if __name__ == "__main__":
    raise SystemExit(main())
