"""Time and peak memory of reading a large run log: `--resume` (RunLog), `summarize` and
`report` (analysis/report/logs.read_run_log), each in a fresh process with tracemalloc's
peak of Python allocations (the file's size is the figure to compare with).

The log is one real run's (cache-2, 3 episodes) followed by its episodes' call lines with
50 kB prompts, up to --megabytes; call lines are what makes an LLM run's log large.

    python benchmarks/log_reading.py [--megabytes 200] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _output import emit  # noqa: E402

READERS = {
    "--resume (RunLog)": "from controllers.runlog import RunLog\n"
                         "with RunLog(path, resume=True):\n    pass",
    "summarize / report (read_run_log)": "from analysis.report.logs import read_run_log\n"
                                         "read_run_log(path)",
}
MEASURE = """
import json, sys, time, tracemalloc
from pathlib import Path
path = Path(sys.argv[1])
tracemalloc.start()
start = time.perf_counter()
{body}
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "peak_bytes": tracemalloc.get_traced_memory()[1]}}))
"""


def padded_log(directory: Path, megabytes: int) -> Path:
    log = directory / "run.jsonl"
    subprocess.run([sys.executable, "-m", "analysis.cli", "run", "--env", "StatefulWorkflow-v0",
                    "--policy", "cache-2", "--episodes", "3", "--log", str(log)],
                   cwd=ROOT, check=True, capture_output=True)
    key = json.loads(log.read_text().splitlines()[-1])["episode_key"]
    line = json.dumps({"type": "call", "episode_key": key, "prompt": "x" * 50_000}).encode()
    with log.open("ab") as sink:
        for _ in range(megabytes * 2**20 // len(line)):
            sink.write(line + b"\n")
    return log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory() as directory:
        log = padded_log(Path(directory), args.megabytes)
        size = log.stat().st_size
        for name, body in READERS.items():
            done = subprocess.run([sys.executable, "-c", MEASURE.format(body=body), str(log)],
                                  cwd=ROOT, check=True, capture_output=True, text=True)
            rows[name] = json.loads(done.stdout)
    print(f"log of {size / 2**20:.0f} MiB")
    print(f"{'reader':<36} {'seconds':>8} {'peak MiB':>9} {'peak / file':>12}")
    for name, row in rows.items():
        print(f"{name:<36} {row['seconds']:>8.2f} {row['peak_bytes'] / 2**20:>9.1f} "
              f"{row['peak_bytes'] / size:>12.2f}")
    emit({"log_bytes": size, "readers": rows}, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
