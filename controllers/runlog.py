"""The one append-only run log and the one resume rule, for every command that plays episodes.

The rule: a log that already holds lines belongs to a run, so writing into it needs resume
(continue that run) or another file; appending a second run to it would mix two runs'
results. `RunLog.check_target` is that rule, `ResumeNeeded` its one error, and every command
(run, llm-study, dacs-study, rcwt sweep) and the RunLog constructor apply it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from controllers.policy import EpisodeRecord


class ResumeNeeded(FileExistsError):
    """A run's output already holds a run and resume was not asked for.

    `subject` says what holds it ("log runs/a.jsonl exists"), `alternative` what else the
    user may choose ("file", "--out"); the advice is the same for every command."""

    def __init__(self, subject: str, alternative: str) -> None:
        super().__init__(f"{subject}: pass --resume to continue it (in Python: pass "
                         f"resume=True), or choose another {alternative}")


def _holds_lines(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


class RunLog:
    """An append-only JSONL log of a run, safe to kill at any moment.

    Every line is one JSON object with a "type": "episode" lines (`episode_key` and the
    EpisodeRecord) are written when an episode ends; policies may add their own lines (an LLM
    policy writes one "call" line per model call); a sweep whose unit is not an episode
    writes one keyed result line per unit (`write_result`). Opening with resume=True reads
    the finished episodes and results of this run and cuts a torn last line, so a rerun
    plays only what has no line yet and each unit ends up in the log exactly once. Appends
    are serialised by a lock, so parallel episodes share one log.
    """

    def __init__(self, path: Path, run: dict[str, Any], resume: bool = False) -> None:
        self.path = Path(path)
        self.run = run
        text = json.dumps(run, sort_keys=True, default=str)
        self.run_id = hashlib.sha256(text.encode()).hexdigest()[:12]
        self._lock = threading.Lock()
        self.finished: dict[str, EpisodeRecord] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.check_target(self.path, resume)
        if _holds_lines(self.path):
            self._read_finished()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = self.path.open("a")

    @staticmethod
    def check_target(path: Path | None, resume: bool) -> None:
        """The resume rule: raise ResumeNeeded when `path` already holds a log and `resume`
        is false. Commands call it before starting anything slow (a server, a study)."""
        if path is not None and not resume and _holds_lines(Path(path)):
            raise ResumeNeeded(f"log {path} exists", "file")

    def _read_finished(self) -> None:
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        prefix = f"{self.run_id}:"
        for line in data.decode().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("type") == "episode" and str(entry.get("episode_key", "")).startswith(
                    prefix):
                self.finished[entry["episode_key"]] = EpisodeRecord(**entry["record"])
            elif entry.get("run_id") == self.run_id and "key" in entry:
                self.results.setdefault(str(entry["key"]), entry)

    def key(self, seed: int) -> str:
        """The episode key of reset seed `seed` in this run."""
        return f"{self.run_id}:{seed}"

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, default=str)
        with self._lock:
            self._sink.write(line + "\n")
            self._sink.flush()

    def write_episode(self, key: str, record: EpisodeRecord) -> None:
        # A shallow copy serialises the same as dataclasses.asdict, which deep-copies every
        # counter and metric first and was three quarters of a logged batched run's time.
        self.write({"type": "episode", "episode_key": key, "record": dict(vars(record))})

    def write_result(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append one finished unit that is not an episode (an RCWT call): `entry` must hold
        "type" and "key"; the run id is added, so a resume finds it in `results`."""
        entry = {**entry, "run_id": self.run_id}
        self.write(entry)
        return entry

    def close(self) -> None:
        with self._lock:
            self._sink.close()
