"""The one append-only run log, the one resume rule, and what names a run.

The resume rule: a log that already holds lines belongs to a run, so writing into it needs
resume (continue that run) or another file. `RunLog.check_target` is that rule, `ResumeNeeded`
its one error, and every command (run, llm-study, dacs-study, rcwt sweep) and the RunLog
constructor apply it.

A run is named by what it measures: its description (env id and kwargs, the policy's own
description, the harness settings) without the transport (`identity`: no base URL, port,
timeout or worker count), so reaching the same server through another address resumes the
run instead of starting a second one beside it. The seeds are in each episode's key, so a
resume with more episodes extends the run. A user may name a run instead (`--run-name`): one
log then holds one run per name, repeats of the same settings included. The first line a run
writes carries its description, and a resume whose settings differ from the recorded ones is
refused with the differences listed (`RunChanged`) rather than silently becoming another run.

One writer at a time: the log is locked (fcntl.flock, exclusive, non-blocking) from open to
close, so a second writer, in another process or in this one, is refused (`LogInUse`) and two
resumers never play the same episodes. The lock is the OS's: a killed writer leaves none.

A damaged log still resumes: reading skips a torn line, a line that is not UTF-8 or not JSON,
and a line that is not an entry of a log (`RunLog.skipped`, counted by kind and reported in one
warning line). The torn last line is cut, so the next append starts on a line of its own.

Each session (every open of a run: the first, and each resume) writes one "session" line
before its first other line, with the provenance of the code that plays it
(controllers/provenance.py: diagym version, git commit, library versions), when it started,
and what the caller adds (a chat server's probed capabilities, say). It is not part of the
identity, so a resume under a newer commit continues the run and the log says which code
played which episodes.

Replayed calls are marked, not dropped. An episode a kill interrupted left call lines behind;
before a resume plays it again it appends a "replay" line for its key, which voids every
earlier line of that episode (its calls, and under retry_failed its episode line). Rewriting
the log to drop them would risk a finished run's lines to a crash mid-rewrite; the void calls
also stay readable as what was sent and paid for. `call_totals` is the one sum over call
lines, counting each decision once and the void ones apart. The answered calls of an
episode that has no episode line are kept when the log is read, and `begin_episode` hands
them to `take_replies`, so a policy can answer the decisions the interrupted attempt had
completed from the log instead of asking its model again (diagym.llm_policies.policy.LLMPolicy).
Reading a finished log for a report or a study is controllers/logreader.py's.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import io
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from diagym.controllers.callline import normalised
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.provenance import provenance

# Settings that say how a run reaches its model, not what it measures; never in an identity.
TRANSPORT_KEYS = frozenset({"base_url", "api_key_env", "timeout", "deadline", "max_retries",
                            "concurrency", "workers", "port"})
# The first-failure category of an episode the provider failed (LLMPolicy's EpisodeAborted):
# the only episodes `retry_failed` plays again.
PROVIDER_ERROR = "provider_error"
LOG_MODE = 0o600  # a new log: read and written by its user only
# Numeric fields of a call line that `call_totals` sums.
CALL_FIELDS = ("provider_prompt_tokens", "provider_completion_tokens", "cl100k_prompt_tokens",
               "cl100k_completion_tokens", "latency_s", "retries", "cost_usd")
# What reading a log may skip, in the order a report names them.
SKIP_KINDS = {"torn": ("torn line", "torn lines"),
              "undecodable": ("line that is not UTF-8", "lines that are not UTF-8"),
              "unparsable": ("line that is not JSON", "lines that are not JSON"),
              "foreign": ("line that is not a log entry", "lines that are not log entries"),
              "out_of_range": ("line with an integer beyond 64 bits",
                               "lines with integers beyond 64 bits")}


class _OutOfRange(ValueError):
    """An integer no record field can hold (every count and seed is an int64 column)."""


def _int64(text: str) -> int:
    value = int(text)
    if not -2**63 <= value < 2**63:
        raise _OutOfRange(text[:20])
    return value

LOGGER = logging.getLogger("diagym.runlog")


class ResumeNeeded(FileExistsError):
    """A run's output already holds a run and resume was not asked for.

    `subject` says what holds it ("log runs/a.jsonl exists"), `alternative` what else the
    user may choose ("file", "--out"); the advice is the same for every command."""

    def __init__(self, subject: str, alternative: str) -> None:
        super().__init__(f"{subject}: pass --resume to continue it (in Python: pass "
                         f"resume=True), or choose another {alternative}")


class RunLogError(RuntimeError):
    """A log that cannot be written as asked; its message is one line for the user."""


class LogInUse(RunLogError):
    """Another writer holds the log's lock."""


class RunChanged(RunLogError):
    """A resume whose settings differ from the ones the log recorded for that run."""


def _holds_lines(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def identity(run: Any) -> Any:
    """`run` as JSON data without its transport keys, at any depth."""
    if isinstance(run, Mapping):
        return {str(k): identity(v) for k, v in run.items() if k not in TRANSPORT_KEYS}
    if isinstance(run, list | tuple):
        return [identity(v) for v in run]
    return json.loads(json.dumps(run, default=str))


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix or "(run)": value}


def differences(recorded: Any, now: Any) -> list[str]:
    """'field: recorded -> now' for every leaf where two descriptions differ."""
    old, new = _flat(recorded), _flat(now)
    absent = object()

    def show(value: Any) -> str:
        text = "(absent)" if value is absent else json.dumps(value, sort_keys=True)
        return text if len(text) <= 60 else text[:57] + "..."

    return [f"{k}: {show(old.get(k, absent))} -> {show(new.get(k, absent))}"
            for k in sorted(old.keys() | new.keys()) if old.get(k, absent) != new.get(k, absent)]


MAX_LINE_BYTES = 64 * 2**20  # a line past this is no entry any writer here makes


def _lines(source: bytes | Path | BinaryIO) -> Iterator[tuple[bytes, bool, int]]:
    """(line without its newline, whether it ended in one, its byte offset) for each line of
    `source`, one line in memory at a time; a line longer than MAX_LINE_BYTES comes as one
    b"\0" marker (read through, never held)."""
    stream: BinaryIO
    if isinstance(source, bytes | bytearray | memoryview):
        stream = io.BytesIO(source)
    elif isinstance(source, Path | str):
        with Path(source).open("rb") as opened:
            yield from _lines(opened)
        return
    else:
        stream = source
    offset = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        start, offset = offset, offset + len(raw)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(MAX_LINE_BYTES)
                offset += len(raw)
            yield b"\0", raw.endswith(b"\n"), start
            continue
        ended = raw.endswith(b"\n")
        yield (raw[:-1] if ended else raw), ended, start


def read_entries(source: bytes | Path | BinaryIO,
                 skipped: Counter[str]) -> Iterator[dict[str, Any]]:
    """The entries of a log in order, read streaming from its path or an open binary file
    (or from bytes already read), so a log of any size is read in the memory of its longest
    line; what is not an entry is counted in `skipped` by kind (SKIP_KINDS) instead."""
    for _, entry in entries_at(source, skipped):
        yield entry


def entries_at(source: bytes | Path | BinaryIO,
               skipped: Counter[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """read_entries' entries, each with the byte offset of its line (entry_at reads it back)."""
    for raw, ended, offset in _lines(source):
        if not ended:
            skipped["torn"] += 1
            return
        entry = _entry(raw, skipped)
        if entry is not None:
            yield offset, entry


def entry_at(path: Path, offset: int) -> dict[str, Any] | None:
    """The entry whose line starts at byte `offset` of the log at `path` (entries_at gave
    the offset); None when that line no longer holds an entry."""
    with Path(path).open("rb") as stream:
        stream.seek(offset)
        line = next(_lines(stream), None)
    return None if line is None or not line[1] else _entry(line[0], Counter())


def _entry(raw: bytes, skipped: Counter[str]) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        skipped["undecodable"] += 1
        return None
    try:
        entry = json.loads(text, parse_int=_int64)
    except _OutOfRange:
        skipped["out_of_range"] += 1
        return None
    except (ValueError, RecursionError):
        skipped["unparsable"] += 1
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        skipped["foreign"] += 1
        return None
    return entry


def _episode_record(entry: dict[str, Any]) -> EpisodeRecord | None:
    if not isinstance(entry.get("episode_key"), str):
        return None
    return episode_record(entry.get("record"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Each field of a logged EpisodeRecord and what its value may be: a line whose record breaks
# one is treated as foreign (skipped and counted) wherever a log is read, never trusted.
RECORD_FIELDS: dict[str, Any] = {
    "episode": _is_int,
    "task_seed": lambda v: v is None or _is_int(v),
    "success": lambda v: isinstance(v, bool),
    "completed": _is_int,
    "calls": _is_int,
    "errors": _is_int,
    "first_failure": lambda v: v is None or isinstance(v, str),
    "episode_return": lambda v: (_is_int(v) or isinstance(v, float)),
    "counters": lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v),
    "metrics": lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v),
}
OPTIONAL_RECORD_FIELDS = ("metrics",)  # lines written before the field existed lack it


def episode_record(record: Any) -> EpisodeRecord | None:
    """The EpisodeRecord a log line's "record" holds, or None when it holds none: a field
    missing, unknown or of the wrong type (RECORD_FIELDS)."""
    if not isinstance(record, dict) or not set(record) <= set(RECORD_FIELDS):
        return None
    for name, valid in RECORD_FIELDS.items():
        if name in record:
            if not valid(record[name]):
                return None
        elif name not in OPTIONAL_RECORD_FIELDS:
            return None
    return EpisodeRecord(**record)


def format_skipped(path: Path, skipped: Mapping[str, int]) -> str:
    """The one warning line for what reading `path` skipped."""
    parts = [f"{skipped[k]} {names[skipped[k] != 1]}"
             for k, names in SKIP_KINDS.items() if skipped.get(k)]
    return (f"log {path}: skipped {', '.join(parts)}; the run resumes from the lines that "
            "are entries")


class RunLog:
    """An append-only JSONL log of runs, safe to kill at any moment, one writer at a time.

    Every line is one JSON object with a "type": "episode" lines (`episode_key` and the
    EpisodeRecord) are written when an episode ends; policies may add their own lines (an LLM
    policy writes one "call" line per model call, a controllers/callline.py CallLine); a
    sweep whose unit is not an episode
    writes one keyed result line per unit (`write_result`); "replay" lines void an
    interrupted episode's earlier lines (module docstring).

    The log plays one run at a time: `run` given here opens it at once, or a caller that
    shares one log between runs (a study's cells) calls `open_run` for each in turn, keeping
    the lock for the whole study. `finished` and `results` are then the open run's finished
    episodes and result lines; `skipped` counts what reading the log skipped. Appends are
    serialised by a thread lock, so parallel episodes share one log.
    """

    def __init__(self, path: Path, run: Mapping[str, Any] | None = None, resume: bool = False,
                 *, name: str | None = None, retry_failed: bool = False,
                 session: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.check_target(self.path, resume)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # the CLI checked where first
        # A new log is the user's alone (it holds prompts and replies); an existing one keeps
        # the mode its owner gave it.
        self._sink = os.fdopen(os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT,
                                       LOG_MODE), "a+b")
        try:
            fcntl.flock(self._sink.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._sink.close()
            raise LogInUse(f"log {self.path} is being written by another run (it holds the "
                           "log's lock): wait for that run to end, or choose another file"
                           ) from None
        self._lock = threading.Lock()
        self.skipped: Counter[str] = Counter()
        self._runs: dict[str | None, dict[str, Any]] = {}   # name -> run id -> identity
        self._described: set[str] = set()
        self._episodes: dict[str, EpisodeRecord] = {}
        self._live: set[str] = set()                        # keys with lines not voided
        self._attempt: dict[str, list[dict[str, Any]]] = {}  # answered calls, no episode yet
        self._replies: dict[str, list[dict[str, Any]]] = {}  # begin_episode -> take_replies
        self._results: dict[str, dict[str, dict[str, Any]]] = {}
        self.run_id = ""
        self.run: Any = None
        self.run_name: str | None = None
        self.finished: dict[str, EpisodeRecord] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self._announce: dict[str, Any] | None = None
        self._session: dict[str, Any] | None = None
        try:
            self._read()
            if run is not None:
                self.open_run(run, name=name, retry_failed=retry_failed, session=session)
        except BaseException:
            self._sink.close()
            raise

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @staticmethod
    def check_target(path: Path | None, resume: bool) -> None:
        """The resume rule: raise ResumeNeeded when `path` already holds a log and `resume`
        is false. Commands call it before starting anything slow (a server, a study)."""
        if path is not None and not resume and _holds_lines(Path(path)):
            raise ResumeNeeded(f"log {path} exists", "file")

    def _read(self) -> None:
        self._sink.seek(0)
        for entry in read_entries(self._sink, self.skipped):
            self._take(normalised(entry))  # a resumed unit's old line, in today's meaning
        if self.skipped["torn"]:  # a torn last line: cut it, so the next line starts clean
            self._sink.truncate(self._torn_at())
        if self.skipped:
            LOGGER.warning("diagym: warning: %s", format_skipped(self.path, self.skipped))

    def _torn_at(self) -> int:
        """The offset just past the log's last newline, read back from the end in blocks."""
        end = self._sink.seek(0, io.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - 2**16)
            self._sink.seek(start)
            found = self._sink.read(position - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            position = start
        return 0

    def _take(self, entry: dict[str, Any]) -> None:
        run_id, run = entry.get("run_id"), entry.get("run")
        if isinstance(run_id, str) and isinstance(run, dict):
            name = entry.get("run_name")
            self._runs.setdefault(name if isinstance(name, str) else None, {}).setdefault(
                run_id, run)
            self._described.add(run_id)
        key = entry.get("episode_key")
        kind = entry["type"]
        if kind == "replay" and isinstance(key, str):
            self._episodes.pop(key, None)
            self._live.discard(key)
            self._attempt.pop(key, None)
        elif kind == "episode":
            self._attempt.pop(key, None)
            record = _episode_record(entry)
            if record is None:
                self.skipped["foreign"] += 1
                return
            self._episodes[key] = record
            self._live.add(key)
        elif isinstance(key, str):
            self._live.add(key)
            if kind == "call" and entry.get("status") == "ok":
                self._attempt.setdefault(key, []).append(entry)
        if isinstance(run_id, str) and "key" in entry:
            self._results.setdefault(run_id, {}).setdefault(str(entry["key"]), entry)

    def open_run(self, run: Mapping[str, Any], *, name: str | None = None,
                 retry_failed: bool = False, session: Mapping[str, Any] | None = None) -> str:
        """Make `run` (a description, `identity` of it names the run) the run this log
        writes; returns its run id. `name`, when given, names the run instead; the run's
        recorded settings must then match too. Raises RunChanged when the log recorded other
        settings for this run. With retry_failed, episodes whose first failure is
        PROVIDER_ERROR do not count as finished, so the runner plays them again. `session`
        adds to the session line (module docstring) what the caller knows about this session
        (a server's capabilities); it is written with the run's first line of the session."""
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"run name must be a non-empty string; got {name!r}")
        ident = identity(run)
        run_id = _digest(ident) if name is None else _digest({"name": name, "run": ident})
        recorded = self._runs.get(name, {})
        which = "the run" if name is None else f"the run named {name!r}"
        if run_id not in recorded and recorded:
            last = list(recorded.values())[-1]
            listed = "; ".join(differences(identity(last), ident)) or \
                "the same settings under an older run id"
            raise RunChanged(f"log {self.path} holds {which} with other settings ({listed}): "
                             "resume with the same settings, or choose another file"
                             + ("" if name is not None else " or a --run-name"))
        with self._lock:
            self.run_id, self.run, self.run_name = run_id, ident, name
            self._announce = None
            if run_id not in self._described:
                self._announce = {"run_id": run_id, "run": ident}
                if name is not None:
                    self._announce["run_name"] = name
            started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            self._session = {"type": "session", "run_id": run_id,
                             "provenance": provenance(), "started": started,
                             **identity(dict(session or {}))}
        prefix = f"{run_id}:"
        self.finished = {
            key: record for key, record in self._episodes.items()
            if key.startswith(prefix) and _counts_finished(record, retry_failed)}
        self.results = dict(self._results.get(run_id, {}))
        return run_id

    def finished_count(self, name: str, seeds: Iterable[int], retry_failed: bool = False
                       ) -> int:
        """How many of reset seeds `seeds` the run named `name` has finished in this log,
        before it is opened: a named run has one run id in a log (`open_run` refuses another),
        so this is what opening it will find, and a study can count its resumed episodes
        before it plays any."""
        count = 0
        for run_id in self._runs.get(name, {}):
            for seed in seeds:
                record = self._episodes.get(f"{run_id}:{seed}")
                count += record is not None and _counts_finished(record, retry_failed)
        return count

    def key(self, seed: int) -> str:
        """The episode key of reset seed `seed` in the open run."""
        return f"{self.run_id}:{seed}"

    def begin_episode(self, key: str) -> None:
        """Called before an episode is played: voids what an earlier attempt at `key` left in
        the log (its calls, its episode line) with one "replay" line, so nothing counts twice.
        The answered calls of an attempt that did not finish are kept for `take_replies`."""
        if key in self._live:
            attempt = self._attempt.pop(key, None)
            if attempt:
                self._replies[key] = attempt
            self.write({"type": "replay", "episode_key": key})

    def take_replies(self, key: str) -> list[dict[str, Any]]:
        """The answered call lines, in order, of the interrupted attempt at `key` that
        `begin_episode` voided (empty when there was none); each is handed out once."""
        return self._replies.pop(key, [])

    def write(self, entry: dict[str, Any]) -> None:
        with self._lock:
            if self._session is not None:  # the session line, and a new run's settings
                session, self._session = self._session, None
                self._append({**session, **(self._announce or {})})
                self._announce = None
            self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        """One line, flushed; the caller holds the thread lock."""
        if "run" in entry and "run_id" in entry:
            self._runs.setdefault(self.run_name, {})[self.run_id] = self.run
            self._described.add(self.run_id)
        line = json.dumps(entry, sort_keys=True, default=str)
        self._sink.write(line.encode() + b"\n")
        self._sink.flush()
        key = entry.get("episode_key")
        if entry.get("type") == "replay":
            self._episodes.pop(key, None)
            self._live.discard(key)
        elif isinstance(key, str):
            self._live.add(key)

    def write_episode(self, key: str, record: EpisodeRecord) -> None:
        # A shallow copy serialises the same as dataclasses.asdict, which deep-copies every
        # counter and metric first and was three quarters of a logged batched run's time.
        # The record is not kept: `finished` is what the log held when the run was opened, and
        # a batched run of millions of episodes must not hold them all in memory.
        self.write({"type": "episode", "episode_key": key, "record": dict(vars(record))})

    def write_result(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append one finished unit that is not an episode (an RCWT call): `entry` must hold
        "type" and "key"; the run id is added, so a resume finds it in `results`."""
        entry = {**entry, "run_id": self.run_id}
        self.write(entry)
        self._results.setdefault(self.run_id, {}).setdefault(str(entry["key"]), entry)
        return entry

    def close(self) -> None:
        with self._lock:
            self._sink.close()  # closing the file releases the flock


def _counts_finished(record: EpisodeRecord, retry_failed: bool) -> bool:
    """Whether a logged episode is finished for a resume: with retry_failed, one whose first
    failure is PROVIDER_ERROR is played again."""
    return not (retry_failed and record.first_failure == PROVIDER_ERROR)


@dataclass(frozen=True)
class CallTotals:
    """Call lines of a log summed once per decision: `calls` and `totals` (CALL_FIELDS) count
    the calls that stand; `replayed` and `replayed_totals` the ones a replay voided (sent and
    paid for, but repeated by the attempt that stands)."""

    calls: int
    totals: dict[str, float]
    replayed: int
    replayed_totals: dict[str, float]
    skipped: dict[str, int] = field(default_factory=dict)


def _summed(entry: dict[str, Any]) -> dict[str, Any]:
    """The fields of a call line call_totals sums: all it holds of a line (not its prompt)."""
    return {name: entry.get(name) for name in CALL_FIELDS}


def call_totals(path: Path, run_id: str | None = None) -> CallTotals:
    """The one sum of calls, tokens and latency over a log's "call" lines (of run `run_id`,
    or of every run): a call line voided by a later "replay" line of its episode, or a result
    line repeating a key of its run, is counted apart, never twice. Reads without the lock
    (a run may be writing)."""
    skipped: Counter[str] = Counter()
    standing: dict[str | None, list[dict[str, Any]]] = {}
    seen_results: set[tuple[str, str]] = set()
    replayed: list[dict[str, Any]] = []

    def run_of(entry: dict[str, Any]) -> str | None:
        key = entry.get("episode_key")
        return key.split(":", 1)[0] if isinstance(key, str) else entry.get("run_id")

    for entry in read_entries(Path(path), skipped):
        entry = normalised(entry)  # an old RCWT line's latency_s was its unit's wall time
        if run_id is not None and run_of(entry) != run_id:
            continue
        key = entry.get("episode_key")
        if entry["type"] == "replay" and isinstance(key, str):
            replayed.extend(standing.pop(key, []))
        elif entry["type"] == "call":
            if "key" in entry and not isinstance(key, str):
                unit = (str(entry.get("run_id")), str(entry["key"]))
                if unit in seen_results:
                    replayed.append(_summed(entry))
                    continue
                seen_results.add(unit)
            standing.setdefault(key if isinstance(key, str) else None, []).append(_summed(entry))
    counted = [entry for entries in standing.values() for entry in entries]

    def total(entries: list[dict[str, Any]]) -> dict[str, float]:
        sums = dict.fromkeys(CALL_FIELDS, 0.0)
        for entry in entries:
            for name in CALL_FIELDS:
                value = entry.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    sums[name] += value
        return sums

    return CallTotals(calls=len(counted), totals=total(counted), replayed=len(replayed),
                      replayed_totals=total(replayed), skipped=dict(skipped))
