"""The one log reader streams: a log is read a line at a time, so resuming a run whose log
holds hundreds of megabytes of model calls takes the memory of its longest line, not of the
file (read from bytes or from the file, the entries and what was skipped are the same)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from diagym.controllers.runlog import MAX_LINE_BYTES, read_entries
from tests.conftest import scaled

ROOT = Path(__file__).resolve().parents[2]
PEAK = """
import sys, tracemalloc
from pathlib import Path
from diagym.controllers.runlog import RunLog
tracemalloc.start()
with RunLog(Path(sys.argv[1]), resume=True) as log:
    pass
print(tracemalloc.get_traced_memory()[1])
"""


def _padded_log(tmp_path: Path, megabytes: int) -> Path:
    """A real run's log followed by `megabytes` of its episodes' call lines (50 kB prompts)."""
    log = tmp_path / "run.jsonl"
    subprocess.run([sys.executable, "-m", "diagym.analysis.cli", "run",
                    "--env", "StatefulWorkflow-v0", "--policy", "cache-2", "--episodes", "3",
                    "--log", str(log)],
                   cwd=ROOT, check=True, capture_output=True, timeout=scaled(300))
    key = json.loads(log.read_text().splitlines()[-1])["episode_key"]
    line = json.dumps({"type": "call", "episode_key": key, "prompt": "x" * 50_000}).encode()
    with log.open("ab") as sink:
        for _ in range(megabytes * 2**20 // len(line)):
            sink.write(line + b"\n")
    return log


def test_resume_of_a_large_log_takes_the_memory_of_a_line(tmp_path: Path) -> None:
    log = _padded_log(tmp_path, 100)
    size = log.stat().st_size
    done = subprocess.run([sys.executable, "-c", PEAK, str(log)], cwd=ROOT, check=True,
                          capture_output=True, text=True, timeout=scaled(300))
    peak = int(done.stdout)
    assert size > 100 * 10**6
    assert peak < 16 * 2**20, f"resume of a {size >> 20} MB log peaked at {peak >> 20} MB"


def test_streaming_and_bytes_read_the_same_entries(tmp_path: Path) -> None:
    lines = [b'{"type": "episode", "n": 1}', b"not json", b"\xff\xfe", b"[1, 2]", b"",
             b'{"type": "call", "n": 12345678901234567890123}', b'{"type": "call", "n": 2}']
    data = b"\n".join(lines) + b"\n" + b'{"type": "torn"'
    path = tmp_path / "log.jsonl"
    path.write_bytes(data)
    from_bytes, from_file = Counter(), Counter()
    entries = list(read_entries(data, from_bytes))
    with path.open("rb") as stream:
        assert list(read_entries(stream, Counter())) == entries
    assert list(read_entries(path, from_file)) == entries
    assert entries == [{"type": "episode", "n": 1}, {"type": "call", "n": 2}]
    assert from_bytes == from_file == Counter(torn=1, unparsable=1, undecodable=1, foreign=1,
                                              out_of_range=1)


def test_a_line_longer_than_the_bound_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with path.open("wb") as sink:
        sink.write(b'{"type": "a"}\n{"type": "b", "x": "' + b"y" * (MAX_LINE_BYTES + 10)
                   + b'"}\n{"type": "c"}\n')
    skipped: Counter[str] = Counter()
    assert [e["type"] for e in read_entries(path, skipped)] == ["a", "c"]
    assert skipped == Counter(unparsable=1)


def test_each_offset_reads_its_entry_back(tmp_path: Path) -> None:
    from diagym.controllers.runlog import entries_at, entry_at

    path = tmp_path / "log.jsonl"
    with path.open("wb") as sink:
        sink.write(b'{"type": "a"}\nnot json\n\n{"type": "b", "x": "' + b"y" * (MAX_LINE_BYTES + 10)
                   + b'"}\n{"type": "c", "s": "\xc3\xa9"}\n{"type": "d"}\n{"type": "torn"')
    found = list(entries_at(path, Counter()))
    assert [entry["type"] for _, entry in found] == ["a", "c", "d"]
    assert [entry_at(path, offset) for offset, _ in found] == [entry for _, entry in found]
    assert list(entries_at(path.read_bytes(), Counter())) == found
    assert entry_at(path, path.stat().st_size - len(b'{"type": "torn"')) is None
    assert entry_at(path, len(b'{"type": "a"}\n')) is None  # "not json"
