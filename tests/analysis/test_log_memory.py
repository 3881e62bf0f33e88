"""`summarize` and `report` of a large chat-model log take memory in proportion to its lines,
not its bytes: call lines are held without their prompts (controllers/logreader.py), and the
report reads back only the prompts of the episodes it details, and each one's up to its
cap. The large log is a small one (a real run's) followed by 40 MB of its episodes' call
lines (50 kB prompts), as an LLM run's log grows; what reading the 40 MB adds to the peak of
the command on the small log (its imports, figures and page) is the figure tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import scaled
from tests.controllers.test_runlog_streaming import _padded_log

ROOT = Path(__file__).resolve().parents[2]
# Over three times the most a command may add to its peak: a reader that held the prompts
# fails.
LARGE_MB = 40
PEAK = """
import sys, tracemalloc
from diagym.analysis.cli import main
tracemalloc.start()
code = main(sys.argv[1:])
print("PEAK", tracemalloc.get_traced_memory()[1], code)
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    small = _padded_log(tmp_path_factory.mktemp("small"), 0)
    return small, _padded_log(tmp_path_factory.mktemp("large"), LARGE_MB)


def _peak(*argv: str) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stderr[-2000:]
    peak, code = done.stdout.rsplit("PEAK", 1)[1].split()
    assert code in ("0", "None")
    return int(peak)


@pytest.mark.timeout(900)
def test_summarize_of_a_large_log_holds_no_prompt(logs: tuple[Path, Path]) -> None:
    small, large = logs
    assert large.stat().st_size > LARGE_MB * 10**6
    added = _peak("summarize", str(large)) - _peak("summarize", str(small))
    assert added < 8 * 2**20, (
        f"{LARGE_MB} MB more of log added {added >> 20} MB to summarize's peak")


@pytest.mark.timeout(900)
def test_report_of_a_large_log_reads_back_only_the_prompts_it_shows(
        logs: tuple[Path, Path], tmp_path: Path) -> None:
    small, large = logs
    base = _peak("report", str(small), "--out", str(tmp_path / "small.html"))
    out = tmp_path / "report.html"
    added = _peak("report", str(large), "--out", str(out)) - base
    assert added < 12 * 2**20, f"{LARGE_MB} MB more of log added {added >> 20} MB to report's peak"
    page = out.read_text()
    start = page.index("x" * 1000)  # the detailed episode's prompt, read back from its line
    assert "bytes cut" in page[start:start + 10_000]
