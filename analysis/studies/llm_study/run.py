"""Play seed 003's language-model designs (design.py) with any chat-model policy.

Episodes run through the one Policy runner (diagym.controllers.rollout.rollout_parallel) on the
text-action env, so records and the run log are those of every other run; each (harness,
cell) is its own run in one shared log, so rerunning with resume plays only what is missing.

The harness (diagym.llm_policies.harness: json, tools, chat) is a factor crossed with the design:
every harness plays every cell on the same task seeds, so its contrasts are paired by task.
The harnesses take turns within each cell rather than one after the other, so a server whose
speed drifts during a study weighs on every harness alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagym.analysis.studies.llm_study.design import Cell, design_cells
from diagym.analysis.studies.named_runs import NamedRuns
from diagym.controllers.episodes import Episodes
from diagym.envs.workflow.params import WorkflowParams
from diagym.llm_policies.harness import HARNESSES

ENV_ID = "StatefulWorkflow-v0"
BASELINE = "json"  # the harness of every study before the harness was a factor


@dataclass(frozen=True)
class CellRun:
    """One (harness, cell) run of a study: its episodes, one per task seed."""

    harness: str
    cell: Cell
    episodes: Episodes


def text_env(spec: WorkflowParams) -> Any:
    """The cell's task behind the text-action wrapper (what a chat model plays)."""
    from diagym.analysis.llm_runs import make_text_env

    return make_text_env(ENV_ID, **dataclasses.asdict(spec))


def check_harnesses(harnesses: Sequence[str]) -> tuple[str, ...]:
    """The harnesses of a study, each once (one name alone is a study of that harness);
    ValueError names the allowed ones."""
    chosen = (harnesses,) if isinstance(harnesses, str) else tuple(harnesses)
    unknown = [h for h in chosen if h not in HARNESSES]
    if not chosen or unknown or len(set(chosen)) != len(chosen):
        raise ValueError(f"harnesses must be distinct names among {' | '.join(HARNESSES)}; "
                         f"got {', '.join(map(repr, chosen)) or 'none'}")
    return chosen


def cell_run_name(harness: str, design: str, cell: Cell, run_name: str | None = None) -> str:
    """The run name of one (harness, cell): the json harness keeps the name a study had
    before the harness was a factor, so logs written then still resume; another harness
    prefixes its name, so its run never collides with json's."""
    prefix = None if harness == BASELINE else harness
    return " ".join(filter(None, (prefix, run_name, design, str(cell.levels))))


def run_design(design: str, first_seed: int, n_seeds: int,
               make_policy: Callable[[str], Callable[[Any], Any]], *,
               harnesses: Sequence[str] = (BASELINE,), log: Path | None = None,
               resume: bool = False, workers: int = 1, progress: bool = False,
               make_env: Callable[[WorkflowParams], Any] = text_env, run_name: str | None = None,
               retry_failed: bool = False, executor: Any = None) -> list[CellRun]:
    """Every cell in every harness on seeds first_seed .. first_seed + n_seeds - 1, in one
    shared run log; make_policy(harness) is the runner's make_policy(env) for that harness.

    A log that already holds a run needs resume=True (diagym.controllers.runlog's one rule); then
    the episodes finished in it are not played again. The log stays locked for the whole
    study. Each (harness, cell) is its own run, named by `cell_run_name`; retry_failed plays
    again the episodes whose first failure is provider_error. Results come in play order:
    cells in standard order, the harnesses in the order given within each. `executor`
    (diagym.controllers.executors) plays each cell's episodes (default: `workers` threads here); the
    study's one log is written here either way. With `progress`, the bar counts every
    episode of the study, and a resumed study's finished ones are done from its start."""
    chosen = check_harnesses(harnesses)
    runs = [(cell, harness, cell_run_name(harness, design, cell, run_name))
            for cell in design_cells(design) for harness in chosen]
    named = NamedRuns([name for *_run, name in runs], range(first_seed, first_seed + n_seeds),
                      log=log, resume=resume, retry_failed=retry_failed, workers=workers,
                      executor=executor, progress=progress, desc=f"{design} design")
    factories = {harness: make_policy(harness) for harness in chosen}
    results = []
    with named:
        for cell, harness, name in runs:
            episodes = named.play(name, lambda cell=cell: make_env(cell.spec),
                                  factories[harness])
            results.append(CellRun(harness, cell, episodes))
    return results
