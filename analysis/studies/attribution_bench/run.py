"""Play the attribution benchmark into a run log, and read a log back as labelled cases.

The injector answers in JSON text behind the text-action wrapper (the invalid_reply cause
needs replies the wrapper refuses), wrapped in `Traced`, so the log holds for every episode
its record (with the label in its counters, analysis/diagnose/faults.py) and its trace line;
each configuration is its own run. `cases` reads any StatefulWorkflow run log this way
(diagnose --log writes the same lines): a case without a label is an episode of another
policy, or one whose fault never became possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

from diagym.analysis.diagnose.attribution import ENV_ID, Trace
from diagym.analysis.diagnose.faults import FaultInjector, Label, label_of
from diagym.analysis.diagnose.run import env_kwargs, label, logged_traces, text_decoder
from diagym.analysis.llm_runs import make_text_env
from diagym.analysis.studies.attribution_bench.design import BenchDesign
from diagym.controllers.logreader import read_log
from diagym.controllers.policy import EpisodeRecord
from diagym.controllers.rollout import rollout_parallel
from diagym.controllers.runlog import RunLog
from diagym.controllers.tracing import Traced
from diagym.envs.workflow.params import WorkflowParams


@dataclass(frozen=True)
class Case:
    """One logged episode: its run's id, configuration, record, trace and label (None:
    unlabelled)."""

    run_id: str
    spec: WorkflowParams
    record: EpisodeRecord
    trace: Trace
    label: Label | None


def run_name(spec: WorkflowParams) -> str:
    return f"attribution-bench {label(spec)}"


def play(design: BenchDesign, log: Path, *, resume: bool = False, workers: int = 1,
         on_record: Callable[[EpisodeRecord], None] | None = None) -> None:
    """Every configuration's episodes of `design`, written to `log` as they finish (resume
    continues an interrupted run without replaying what the log holds)."""
    run_log = RunLog(Path(log), resume=resume)
    try:
        for spec in design.configurations:
            kwargs = env_kwargs(spec)

            def make_env(kwargs: dict = kwargs) -> gym.Env:
                return make_text_env(ENV_ID, **kwargs)

            def make_policy(env: gym.Env, spec: WorkflowParams = spec) -> Traced:
                injector = FaultInjector(spec, base=design.base, causes=design.causes)
                return Traced(injector, text_decoder(env))

            rollout_parallel(make_env, make_policy, design.episodes, seed=design.seed,
                             workers=workers, log=run_log, on_record=on_record,
                             run_name=run_name(spec))
    finally:
        run_log.close()


def cases(log: Path) -> list[Case]:
    """Every StatefulWorkflow episode of `log` with its trace, in run then seed order;
    ValueError (one line) for a log without such runs or an episode without its trace."""
    found: list[Case] = []
    for logged in read_log(Path(log)).values():
        if logged.run.get("env") != ENV_ID:
            continue
        kwargs = dict(logged.run.get("env_kwargs", {}))
        spec = WorkflowParams.from_kwargs(**kwargs)
        traces = logged_traces(spec, logged)
        for seed in sorted(logged.episodes):
            if seed not in traces:
                raise ValueError(f"log {log}: episode of task seed {seed} of run "
                                 f"{logged.run_id} has no trace line")
            record = logged.episodes[seed]
            found.append(Case(logged.run_id, spec, record, Trace(kwargs, seed, traces[seed]),
                              label_of(record.counters)))
    if not found:
        raise ValueError(f"log {log} holds no {ENV_ID} episode")
    return found
