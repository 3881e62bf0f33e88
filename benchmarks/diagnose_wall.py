"""Wall and CPU time of `diagym diagnose` of a fast agent beside `diagym run` of the same
episodes, each a fresh process, so what the diagnosis adds to the play is the difference.

The play: `diagym run` of every default battery configuration with its default allocation
(512 episodes, episode i on task seed i, as the diagnosis plays them), all ten in one
process through the CLI's own entry point, so the interpreter starts once as for the
diagnosis. Two agents: cache-2 (a reference controller) and a user's policy class from a
file (tests/user_policy.py:Greedy, `--policy FILE.py:Class`); the adaptive design of cache-2
is timed too, with no play counterpart (its episodes are its own choice).

The kernels' compile cache and the model cache (analysis/diagnose/model_cache.py) are warm:
every contender runs once to warm up (the first diagnosis builds the model in a scratch
$XDG_CACHE_HOME, or finds it in `--cache-home`) before the timed rounds. `--empty-cache` adds
the diagnoses with an empty model cache, which simulate the model and the lapse screen
(minutes each). CPU is the child's user + system time. Medians over `--repeats` interleaved
rounds (_measure.measure), with the load average before and after.

    python benchmarks/diagnose_wall.py [--repeats 3] [--empty-cache] [--cache-home DIR]
                                       [--json-out FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

POLICIES = {"cache-2": "cache-2", "user policy": "tests/user_policy.py:Greedy"}
PLAY = """
import json, sys
from diagym.analysis.cli.main import main
from diagym.analysis.diagnose.battery import DEFAULT_ALLOCATION, DEFAULT_BATTERY
for spec, episodes in zip(DEFAULT_BATTERY, DEFAULT_ALLOCATION, strict=True):
    if episodes and main(["run", "--env", "StatefulWorkflow-v0", "--env-kwargs",
                          json.dumps(spec.as_dict()), "--policy", sys.argv[1],
                          "--episodes", str(episodes), "--json"]):
        sys.exit(1)
"""


def timed(argv: list[str], cache_home: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process."""
    import diagym.envs._core.numba_setup  # noqa: F401  (chooses NUMBA_CACHE_DIR for this process)

    environment = {**os.environ, "XDG_CACHE_HOME": str(cache_home),
                   "NUMBA_CACHE_DIR": os.environ["NUMBA_CACHE_DIR"],
                   "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=environment,
                          capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-400:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--empty-cache", action="store_true",
                        help="also time diagnoses with an empty model cache (minutes each)")
    parser.add_argument("--cache-home", type=Path,
                        help="the warm runs' XDG_CACHE_HOME (default: a scratch one, so the "
                             "warm-up builds the model)")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    diagnose = ["-m", "diagym.analysis.cli", "diagnose", "--json", "--policy"]
    commands = {}
    for name, policy in POLICIES.items():
        commands[f"run, {name}"] = ["-c", PLAY, policy]
        commands[f"diagnose, {name}"] = [*diagnose, policy]
    commands["diagnose --adaptive, cache-2"] = [*diagnose, "cache-2", "--adaptive"]
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="diagym-wall-") as scratch:
        warm_home = args.cache_home or Path(scratch) / "warm"

        def run(name: str, argv: list[str], empty: bool) -> float:
            if empty:
                with tempfile.TemporaryDirectory(dir=scratch) as home:
                    wall, seconds = timed(argv, Path(home))
            else:
                wall, seconds = timed(argv, warm_home)
            cpu[name].append(seconds)
            return wall

        contenders = {name: lambda name=name, argv=argv: run(name, argv, False)
                      for name, argv in commands.items()}
        if args.empty_cache:
            for name in ("diagnose, cache-2", "diagnose --adaptive, cache-2"):
                key = f"{name} (empty model cache)"
                cpu[key] = []
                contenders[key] = lambda key=key, argv=commands[name]: run(key, argv, True)
        wall = measure(contenders, args.repeats)
    load_after = os.getloadavg()
    cpu_median = {name: statistics.median(values[1:]) for name, values in cpu.items()}
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print(f"{'command':<48} {'wall s':>8} {'CPU s':>8}")
    for name in wall:
        print(f"{name:<48} {wall[name]:>8.2f} {cpu_median[name]:>8.2f}")
    added = {}
    for name in POLICIES:
        added[name] = {"wall": round(wall[f"diagnose, {name}"] - wall[f"run, {name}"], 2),
                       "cpu": round(cpu_median[f"diagnose, {name}"]
                                    - cpu_median[f"run, {name}"], 2)}
        print(f"diagnose minus run, {name}: {added[name]['wall']:.2f} s wall, "
              f"{added[name]['cpu']:.2f} s CPU")
    emit({"repeats": args.repeats, "policies": POLICIES,
          "load_average": {"before": [round(x, 2) for x in load_before],
                           "after": [round(x, 2) for x in load_after]},
          "wall_seconds": {k: round(v, 2) for k, v in wall.items()},
          "cpu_seconds": {k: round(v, 2) for k, v in cpu_median.items()},
          "diagnose_minus_run": added}, args.json_out)


if __name__ == "__main__":
    main()
