"""The one append-only run log and the one resume rule, for every command that plays episodes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from controllers.policy import EpisodeRecord


class RunLog:
    """An append-only JSONL log of a run, safe to kill at any moment.

    Every line is one JSON object with a "type": "episode" lines (`episode_key` and the
    EpisodeRecord) are written when an episode ends; policies may add their own lines (an LLM
    policy writes one "call" line per model call). Opening with resume=True reads the finished
    episodes and cuts a torn last line, so a rerun plays only the episodes that have no
    "episode" line and each episode ends up in the log exactly once. Appends are serialised by
    a lock, so parallel episodes share one log.
    """

    def __init__(self, path: Path, run: dict[str, Any], resume: bool = False) -> None:
        self.path = Path(path)
        self.run = run
        text = json.dumps(run, sort_keys=True, default=str)
        self.run_id = hashlib.sha256(text.encode()).hexdigest()[:12]
        self._lock = threading.Lock()
        self.finished: dict[str, EpisodeRecord] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise FileExistsError(
                    f"log {self.path} exists: pass resume=True (--resume) to continue it, or "
                    f"choose another file"
                )
            self._read_finished()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = self.path.open("a")

    def _read_finished(self) -> None:
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        for line in data.decode().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("type") == "episode" and entry.get("episode_key", "").startswith(
                    f"{self.run_id}:"):
                self.finished[entry["episode_key"]] = EpisodeRecord(**entry["record"])

    def key(self, seed: int) -> str:
        """The episode key of reset seed `seed` in this run."""
        return f"{self.run_id}:{seed}"

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, default=str)
        with self._lock:
            self._sink.write(line + "\n")
            self._sink.flush()

    def write_episode(self, key: str, record: EpisodeRecord) -> None:
        self.write({"type": "episode", "episode_key": key, "record": dataclasses.asdict(record)})

    def close(self) -> None:
        with self._lock:
            self._sink.close()
