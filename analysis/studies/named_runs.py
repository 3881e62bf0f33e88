"""What the studies that play a policy share: named runs of episodes in one run log, with one
progress bar over all of them.

Why one: a study of many arms or cells is many runs (each named, so a resume finds it) on the
same seeds, and the rules around them are the same in every such study: the log's resume rule
is checked before anything plays, the one log stays locked for the whole study, and the bar
counts every episode of every run, a resumed study's finished ones done from its start. A
study opens `NamedRuns` around its loop and plays each run with `play`; whatever it raises
inside closes the bar and the log first, so its error is the last line a command prints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from diagym.controllers.rollout import rollout_parallel
from diagym.controllers.runlog import RunLog


class NamedRuns(contextlib.ExitStack):
    """The runs named `names`, each on reset seeds `seeds`, into `log` (None: no log).

    `resume` is the log's resume rule; `retry_failed` plays again the episodes whose first
    failure is provider_error; `workers` and `executor` are rollout_parallel's. With
    `progress` one bar, titled `desc`, counts len(names) x len(seeds) episodes."""

    def __init__(self, names: Sequence[str], seeds: range, *, log: Path | None = None,
                 resume: bool = False, retry_failed: bool = False, workers: int = 1,
                 executor: Any = None, progress: bool = False, desc: str = "study") -> None:
        super().__init__()
        RunLog.check_target(log, resume)
        self.names, self.seeds, self.log = tuple(names), seeds, log
        self.retry_failed, self.workers, self.executor = retry_failed, workers, executor
        self.progress, self.desc = progress, desc
        self.shared: RunLog | None = None
        self.on_record: Callable[[Any], None] | None = None

    def __enter__(self) -> NamedRuns:
        super().__enter__()
        try:
            if self.log is not None:
                self.shared = self.enter_context(RunLog(self.log, resume=True))
            if self.progress:
                from diagym.analysis.progress import progress as progress_bar

                done = 0 if self.shared is None else sum(
                    self.shared.finished_count(name, self.seeds, self.retry_failed)
                    for name in self.names)
                bar = self.enter_context(progress_bar(
                    total=len(self.names) * len(self.seeds), desc=self.desc, unit="episode",
                    initial=done, resumed_from=self.log))
                self.on_record = lambda _record: bar.update(1)
        except BaseException:
            self.close()
            raise
        return self

    def play(self, name: str, make_env: Callable[[], Any],
             make_policy: Callable[[Any], Any]) -> Any:
        """The episodes of the run `name` (one of `names`), played into the shared log."""
        if name not in self.names:
            raise ValueError(f"run {name!r} is not one of this study's runs")
        return rollout_parallel(make_env, make_policy, len(self.seeds),
                                seed=self.seeds.start, workers=self.workers, log=self.shared,
                                on_record=self.on_record, run_name=name,
                                retry_failed=self.retry_failed, executor=self.executor)
