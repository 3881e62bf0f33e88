"""Size and speed of `diagym report` on reference-controller run logs of growing length.

For each log (`diagym run --policy exact --log`, StatefulWorkflow-v0, batched): the report's
bytes, the bytes per listed episode, the median time to build it (analysis.report.write_report,
interleaved over repeats, since the machine is shared) and the median time headless Chromium
takes to load it from disk (navigation start to the load event: parsing the HTML, decoding the
inline episode JSON and drawing the viewer's first page), with playwright driving Debian's
/usr/bin/chromium. Without chromium or playwright the load column is left out, saying so.

    python benchmarks/report.py [--episodes 1000 10000 100000] [--repeats 3] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure  # noqa: E402
from _output import emit  # noqa: E402

from diagym.analysis.report import write_report  # noqa: E402
from diagym.analysis.report.episodes import DETAILED_EPISODES, LISTED_EPISODES  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def make_log(directory: Path, episodes: int) -> Path:
    log = directory / f"exact-{episodes}.jsonl"
    subprocess.run([sys.executable, "-m", "diagym.analysis.cli", "run", "--env",
                    "StatefulWorkflow-v0", "--policy", "exact", "--episodes", str(episodes),
                    "--log", str(log)], check=True, capture_output=True, cwd=ROOT)
    return log


def build(log: Path, out: Path) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        write_report([log], out)
        return time.perf_counter() - start
    return run


def load_times(pages: list[Path], repeats: int) -> dict[str, float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not CHROMIUM.is_file():
        return None
    samples: dict[str, list[float]] = {str(p): [] for p in pages}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        for round_ in range(repeats + 1):  # round 0 warms the browser up
            for path in pages:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(path.resolve().as_uri(), wait_until="load")
                ms = page.evaluate("performance.getEntriesByType('navigation')[0]"
                                   ".loadEventEnd")
                assert page.locator("#episodes tbody tr").count() > 0
                page.close()
                if round_:
                    samples[str(path)].append(ms / 1000)
        browser.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="diagym-bench-report-") as tmp:
        directory = Path(tmp)
        logs = {n: make_log(directory, n) for n in args.episodes}
        outs = {n: directory / f"report-{n}.html" for n in args.episodes}
        built = measure({str(n): build(logs[n], outs[n]) for n in args.episodes},
                        args.repeats)
        loaded = load_times([outs[n] for n in args.episodes], args.repeats)
        rows = []
        for n in args.episodes:
            size = outs[n].stat().st_size
            listed = min(n, LISTED_EPISODES)
            rows.append({
                "episodes": n, "log_bytes": logs[n].stat().st_size, "report_bytes": size,
                "listed_episodes": listed, "detailed_episodes": min(n, DETAILED_EPISODES),
                "build_s": built[str(n)],
                "load_s": None if loaded is None else loaded[str(outs[n])],
            })
    print(f"{'episodes':>9} {'log MB':>8} {'report MB':>10} {'listed':>7} {'build s':>8} "
          f"{'load s':>7}")
    for row in rows:
        load = "n/a" if row["load_s"] is None else f"{row['load_s']:.2f}"
        print(f"{row['episodes']:>9,} {row['log_bytes'] / 1e6:>8.2f} "
              f"{row['report_bytes'] / 1e6:>10.2f} {row['listed_episodes']:>7,} "
              f"{row['build_s']:>8.2f} {load:>7}")
    if loaded is None:
        print("load times: not measured (no /usr/bin/chromium or no playwright)")
    emit({"benchmark": "report", "env": "StatefulWorkflow-v0", "policy": "exact",
          "repeats": args.repeats, "statistic": "median", "rows": rows}, args.json_out)


if __name__ == "__main__":
    main()
