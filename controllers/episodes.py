"""The episodes of a run as columns, so a million episodes cost arrays rather than objects.

`rollout` returns an `Episodes`: a Sequence of EpisodeRecord for code that reads one episode
at a time, and `columns` / `counters` (numpy arrays, one entry per episode) for the summary
and the tables, which never need a Python object per episode. Records built by the per-step
runner and columns filled by the batched runner compare equal episode by episode.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from diagym.controllers.policy import EpisodeRecord

# Column -> dtype. first_failure holds str or None (object), the others are numeric. An
# integer column keeps the integer dtype it is given (the batched runner fills int32 where
# values provably fit, halving a large run's memory); anything else is cast to the dtype here.
COLUMNS: dict[str, Any] = {
    "episode": np.int64,
    "task_seed": np.int64,  # -1 where the env reports none
    "success": np.bool_,
    "completed": np.int64,
    "calls": np.int64,
    "errors": np.int64,
    "first_failure": object,
    "episode_return": np.float64,
}


def _column(values: Any, dtype: Any) -> np.ndarray:
    array = np.asarray(values)
    if dtype is np.int64 and array.dtype.kind in "iu" and array.dtype.itemsize <= 8:
        return array
    return np.asarray(values, dtype=dtype)


class NoMetrics(Sequence[dict[str, Any]]):
    """`size` empty metrics dicts without holding them: the metrics of an env that reports
    none (StatefulWorkflow), where a list of millions of `{}` would cost more than the run."""

    def __init__(self, size: int) -> None:
        self._size = size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> NoMetrics: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | NoMetrics:
        if isinstance(index, slice):
            return NoMetrics(len(range(self._size)[index]))
        range(self._size)[index]  # IndexError outside, as a list would raise
        return {}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NoMetrics):
            return other._size == self._size
        return isinstance(other, Sequence) and len(other) == self._size and not any(other)

    __hash__ = None  # type: ignore[assignment]


class Episodes(Sequence[EpisodeRecord]):
    """Per-episode columns (COLUMNS), per-episode agent counters and env metrics.

    `metrics` is a Sequence of dicts, one per episode; left out, every episode has none
    (`has_metrics` is then False and nothing per episode is stored)."""

    def __init__(self, columns: dict[str, np.ndarray],
                 counters: dict[str, np.ndarray] | None = None,
                 metrics: Sequence[dict[str, Any]] | None = None) -> None:
        missing = sorted(set(COLUMNS) - set(columns))
        if missing:
            raise ValueError(f"Episodes needs the columns {sorted(COLUMNS)}; missing {missing}")
        self.columns = {name: _column(columns[name], dtype) for name, dtype in COLUMNS.items()}
        size = len(self.columns["episode"])
        self.counters = {name: np.asarray(values) for name, values in (counters or {}).items()}
        if metrics is None or isinstance(metrics, NoMetrics):
            self.metrics: Sequence[dict[str, Any]] = NoMetrics(size if metrics is None
                                                               else len(metrics))
        else:
            self.metrics = list(metrics)
        lengths = {len(v) for v in (*self.columns.values(), *self.counters.values())}
        if lengths - {size} or len(self.metrics) != size:
            raise ValueError("Episodes: every column, counter and metrics list needs one entry "
                             "per episode")

    @property
    def has_metrics(self) -> bool:
        """Whether any episode carries env metrics (DACSSteering does, StatefulWorkflow not)."""
        return not isinstance(self.metrics, NoMetrics) and any(self.metrics)

    @classmethod
    def from_records(cls, records: Sequence[EpisodeRecord]) -> Episodes:
        """Columns from records (counters: the names every record reports)."""
        if isinstance(records, Episodes):
            return records
        columns = {name: [getattr(r, name) for r in records] for name in COLUMNS}
        columns["task_seed"] = [-1 if s is None else s for s in columns["task_seed"]]
        shared = set.intersection(*(set(r.counters) for r in records)) if records else set()
        counters = {name: [r.counters[name] for r in records] for name in sorted(shared)}
        metrics = [r.metrics for r in records]
        return cls(columns, counters, metrics if any(metrics) else None)

    @classmethod
    def concatenate(cls, parts: Sequence[Episodes]) -> Episodes:
        """The parts one after another (counters: the names every non-empty part reports,
        so an empty part, which reports none, drops nothing)."""
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if not parts:
            return cls.from_records([])
        columns = {name: np.concatenate([p.columns[name] for p in parts]) for name in COLUMNS}
        shared = set.intersection(*(set(p.counters) for p in parts))
        counters = {name: np.concatenate([p.counters[name] for p in parts])
                    for name in sorted(shared)}
        if any(p.has_metrics for p in parts):
            metrics: Sequence[dict[str, Any]] | None = [m for p in parts for m in p.metrics]
        else:
            metrics = None
        return cls(columns, counters, metrics)

    def take(self, indices: np.ndarray) -> Episodes:
        """The episodes at `indices` (an integer array), in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        metrics = (NoMetrics(len(indices)) if isinstance(self.metrics, NoMetrics)
                   else [self.metrics[i] for i in indices.tolist()])
        return Episodes({k: v[indices] for k, v in self.columns.items()},
                        {k: v[indices] for k, v in self.counters.items()}, metrics)

    def __len__(self) -> int:
        return len(self.columns["episode"])

    @overload
    def __getitem__(self, index: int) -> EpisodeRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Episodes: ...

    def __getitem__(self, index: int | slice) -> EpisodeRecord | Episodes:
        if isinstance(index, slice):
            return Episodes({k: v[index] for k, v in self.columns.items()},
                            {k: v[index] for k, v in self.counters.items()},
                            self.metrics[index])
        c = self.columns
        i = range(len(self))[index]
        seed = int(c["task_seed"][i])
        failure = c["first_failure"][i]
        return EpisodeRecord(
            episode=int(c["episode"][i]), task_seed=None if seed < 0 else seed,
            success=bool(c["success"][i]), completed=int(c["completed"][i]),
            calls=int(c["calls"][i]), errors=int(c["errors"][i]),
            first_failure=None if failure is None else str(failure),
            episode_return=float(c["episode_return"][i]),
            counters={k: v[i].item() for k, v in self.counters.items()},
            metrics=dict(self.metrics[i]))

    def __iter__(self) -> Iterator[EpisodeRecord]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]
