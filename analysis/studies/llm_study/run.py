"""Play seed 003's language-model designs (design.py) with any chat-model policy.

Episodes run through the one Policy runner (controllers.rollout.rollout_parallel) on the
text-action env, so records and the run log are those of every other run; each cell is its
own run in one shared log, so rerunning with resume plays only what is missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from analysis.studies.llm_study.design import Cell, design_cells
from controllers.policy import EpisodeRecord
from controllers.rollout import rollout_parallel
from controllers.runlog import RunLog
from envs.workflow.params import WorkflowSpec

ENV_ID = "StatefulWorkflow-v0"


def text_env(spec: WorkflowSpec) -> Any:
    """The cell's task behind the text-action wrapper (what a chat model plays)."""
    from analysis.llm_runs import make_text_env

    return make_text_env(ENV_ID, **dataclasses.asdict(spec))


def run_design(design: str, first_seed: int, n_seeds: int, make_policy: Callable[[Any], Any],
               log: Path | None = None, resume: bool = False, workers: int = 1,
               progress: bool = False, make_env: Callable[[WorkflowSpec], Any] = text_env,
               run_name: str | None = None, retry_failed: bool = False,
               ) -> list[tuple[Cell, Sequence[EpisodeRecord]]]:
    """Every cell on seeds first_seed .. first_seed + n_seeds - 1, in one shared run log.

    A log that already holds a run needs resume=True (controllers.runlog's one rule); then
    the episodes finished in it are not played again. Each cell is its own run, named by the
    design and its levels (prefixed by `run_name` when given); retry_failed plays again the
    episodes whose first failure is provider_error."""
    RunLog.check_target(log, resume)
    cells = design_cells(design)
    bar = None
    if progress:
        from analysis.progress import progress as progress_bar

        bar = progress_bar(total=len(cells) * n_seeds, desc=f"{design} design", unit="episode")
    results = []
    try:
        for cell in cells:
            records = rollout_parallel(
                lambda cell=cell: make_env(cell.spec), make_policy, n_seeds, seed=first_seed,
                workers=workers, log=log, resume=log is not None,
                on_record=(lambda _r: bar.update(1)) if bar is not None else None,
                run_name=" ".join(filter(None, (run_name, design, str(cell.levels)))),
                retry_failed=retry_failed)
            results.append((cell, records))
    finally:
        if bar is not None:
            bar.close()
    return results
