"""Wall time of `diagym diagnose` of a fast agent (a reference controller, fixed battery and
adaptive), each a fresh process: with an empty model cache (the model and the lapse screen
simulated, as every process did before analysis/diagnose/model_cache.py) and with the cache
the first run left. The kernels' compile cache is the same warm one for both, so the
difference is the model's. Medians over `--repeats`, interleaved (_measure.measure).

    python benchmarks/diagnose_wall.py [--repeats 3] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import os
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

COMMANDS = {
    "diagnose --policy cache-2": ["diagnose", "--policy", "cache-2", "--json"],
    "diagnose --policy cache-2 --adaptive": ["diagnose", "--policy", "cache-2", "--adaptive",
                                             "--json"],
}


def seconds(argv: list[str], cache_home: Path) -> float:
    import diagym.envs._core.numba_setup  # noqa: F401  (chooses NUMBA_CACHE_DIR for this process)

    environment = {**os.environ, "XDG_CACHE_HOME": str(cache_home),
                   "NUMBA_CACHE_DIR": os.environ["NUMBA_CACHE_DIR"],
                   "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "diagym.analysis.cli", *argv], cwd=ROOT,
                          env=environment, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-400:])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="diagym-wall-") as scratch:
        warm_home = Path(scratch) / "warm"

        def cold(argv: list[str]) -> float:
            with tempfile.TemporaryDirectory(dir=scratch) as empty:
                return seconds(argv, Path(empty))

        contenders = {}
        for name, argv in COMMANDS.items():
            contenders[f"{name} (empty model cache)"] = lambda argv=argv: cold(argv)
            contenders[f"{name} (model cached)"] = lambda argv=argv: seconds(argv, warm_home)
        found = measure(contenders, args.repeats)
    print(f"{'command':<62} {'seconds':>8}")
    for name, value in found.items():
        print(f"{name:<62} {value:>8.2f}")
    emit({"repeats": args.repeats, "seconds": {k: round(v, 2) for k, v in found.items()}},
         args.json_out)


if __name__ == "__main__":
    main()
