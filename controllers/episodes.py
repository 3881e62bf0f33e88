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

from controllers.policy import EpisodeRecord

# Column -> dtype. first_failure holds str or None (object), the others are numeric.
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


class Episodes(Sequence[EpisodeRecord]):
    """Per-episode columns (COLUMNS), per-episode agent counters and env metrics."""

    def __init__(self, columns: dict[str, np.ndarray],
                 counters: dict[str, np.ndarray] | None = None,
                 metrics: Sequence[dict[str, Any]] | None = None) -> None:
        missing = sorted(set(COLUMNS) - set(columns))
        if missing:
            raise ValueError(f"Episodes needs the columns {sorted(COLUMNS)}; missing {missing}")
        self.columns = {name: np.asarray(columns[name], dtype=dtype)
                        for name, dtype in COLUMNS.items()}
        size = len(self.columns["episode"])
        self.counters = {name: np.asarray(values) for name, values in (counters or {}).items()}
        self.metrics = list(metrics) if metrics is not None else [{} for _ in range(size)]
        lengths = {len(v) for v in (*self.columns.values(), *self.counters.values())}
        if lengths - {size} or len(self.metrics) != size:
            raise ValueError("Episodes: every column, counter and metrics list needs one entry "
                             "per episode")

    @classmethod
    def from_records(cls, records: Sequence[EpisodeRecord]) -> Episodes:
        """Columns from records (counters: the names every record reports)."""
        if isinstance(records, Episodes):
            return records
        columns = {name: [getattr(r, name) for r in records] for name in COLUMNS}
        columns["task_seed"] = [-1 if s is None else s for s in columns["task_seed"]]
        shared = set.intersection(*(set(r.counters) for r in records)) if records else set()
        counters = {name: [r.counters[name] for r in records] for name in sorted(shared)}
        return cls(columns, counters, [r.metrics for r in records])

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
