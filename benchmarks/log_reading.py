"""Time and peak memory of reading a large run log: `--resume` (RunLog), `diagym summarize`
and `diagym report`, each in a fresh process with tracemalloc's peak of Python allocations,
on a small log and on the same log grown to --megabytes; what the growth adds to the peak,
beside the bytes it adds to the file, is the figure (a reader that holds the file's prompts
adds about as much as the file grows).

The small log is one real run's (cache-2, 3 episodes); the growth is its episodes' call
lines with 50 kB prompts, up to --megabytes; call lines are what makes an LLM run's log large.

    python benchmarks/log_reading.py [--megabytes 200] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

READERS = {
    "--resume (RunLog)": "from diagym.controllers.runlog import RunLog\n"
                         "with RunLog(path, resume=True):\n    pass",
    "diagym summarize": "from diagym.analysis.cli import main\nmain(['summarize', str(path)])",
    "diagym report": "from diagym.analysis.cli import main\n"
                     "main(['report', str(path), '--out', str(path) + '.html', '--force'])",
}
MEASURE = """
import contextlib, io, json, sys, time, tracemalloc
from pathlib import Path
path = Path(sys.argv[1])
tracemalloc.start()
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
{body}
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "peak_bytes": tracemalloc.get_traced_memory()[1]}}))
"""


def padded_log(directory: Path, megabytes: int) -> Path:
    log = directory / "run.jsonl"
    subprocess.run([sys.executable, "-m", "diagym.analysis.cli", "run",
                    "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes", "3",
                    "--log", str(log)],
                   cwd=ROOT, check=True, capture_output=True)
    grow(log, megabytes)
    return log


def grow(log: Path, megabytes: int) -> None:
    """Append `megabytes` of call lines with 50 kB prompts to the log's last episode."""
    key = json.loads(log.read_text().splitlines()[-1])["episode_key"]
    line = json.dumps({"type": "call", "episode_key": key, "prompt": "x" * 50_000}).encode()
    with log.open("ab") as sink:
        for _ in range(megabytes * 2**20 // len(line)):
            sink.write(line + b"\n")


def _measure(body: str, log: Path) -> dict[str, float]:
    indented = "\n".join("    " + line for line in body.splitlines())
    done = subprocess.run([sys.executable, "-c", MEASURE.format(body=indented), str(log)],
                          cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory() as directory:
        small = padded_log(Path(directory), 0)
        large = Path(directory) / "large" / "run.jsonl"
        large.parent.mkdir()
        shutil.copy(small, large)
        grow(large, args.megabytes)
        size = large.stat().st_size
        added = size - small.stat().st_size
        for name, body in READERS.items():
            base, grown = _measure(body, small), _measure(body, large)
            rows[name] = {"seconds": grown["seconds"], "peak_bytes": grown["peak_bytes"],
                          "small_log_peak_bytes": base["peak_bytes"],
                          "added_peak_bytes": grown["peak_bytes"] - base["peak_bytes"]}
    print(f"log of {size / 2**20:.0f} MiB ({added / 2**20:.0f} MiB of call "
          "lines added to a small log)")
    print(f"{'reader':<20} {'seconds':>8} {'peak MiB':>9} {'added MiB':>10} "
          f"{'added / file added':>19}")
    for name, row in rows.items():
        print(f"{name:<20} {row['seconds']:>8.2f} {row['peak_bytes'] / 2**20:>9.1f} "
              f"{row['added_peak_bytes'] / 2**20:>10.1f} "
              f"{row['added_peak_bytes'] / added:>19.3f}")
    emit({"log_bytes": size, "added_bytes": added, "readers": rows},
         args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
