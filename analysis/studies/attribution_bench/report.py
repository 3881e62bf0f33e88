"""diagym's per-decision attribution scored against the injected labels.

Per failed labelled episode, the attribution (analysis/diagnose/attribution.py) names a step
and a cause: the first call its replay finds failed, and that call's category (stale_value,
initial_value, wrong_register, guess, ambiguous, dependency, completed). An invalid reply
never reaches a trace: a diagnosis sees it only as an episode the env did not end, whose
record says why (run.Configuration.ended_by_env, the report's `without_outcome`). So the
scored prediction is the trace's when it holds a failed call, else, for an episode that
ended on an unexecuted reply, that reply (the decision after the trace) with the cause
invalid_reply; `trace_only` scores the trace alone, where every invalid reply is a miss.

Before scoring, each label is checked against the env's own outcomes on replay: the calls
before the decisive step succeed; from it to the episode's end every call fails with the
cause's env category (candidate for the slot faults), R + 1 of them, and the last is the
label's terminal step; an invalid reply ends the episode right after a trace of successes,
with the record's first failure invalid_json. A value fault's value must also be a member of
the attribution's own explanation of that name (the injector and the replay track what is
public independently). `check_failures` lists every violation: none means the labels are
exact.

Figures: step accuracy (predicted step == decisive step), terminal-step accuracy (the last
failed call == the call that exhausted the budget), cause accuracy (== the label's cause;
"ambiguous" is never right), `label_fits` (the label is among the explanations fitting the
slot), each with its Wilson 95% interval; Cohen's kappa of predicted against labelled causes
with a bootstrap percentile interval over episodes, and the chance agreement p_e of the
marginals; all per cause and per configuration, and the confusion matrix. For a guess, the
share of wrong slots at its decision that some explanation fits is the analytic chance that
a uniform guess is read as a mistake of another kind: `guess_fit_expected` (its mean) is
that prediction, to compare with the observed share of guesses not called guess.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym.analysis.diagnose.attribution import (
    AMBIGUOUS,
    GUESS,
    OK,
    Decision,
    attribute,
    explanation_values,
    replay,
)
from diagym.analysis.diagnose.faults import (
    CAUSES,
    ENV_FAILURE,
    INVALID_REPLY,
    TEXT_FAILURE,
    VALUE_CAUSES,
)
from diagym.analysis.diagnose.run import label as config_label
from diagym.analysis.stats import wilson_interval
from diagym.analysis.studies.attribution_bench.run import Case

NONE = "none"  # no failed call found
BOOTSTRAP = 2000
BOOTSTRAP_SEED = 27


@dataclass(frozen=True)
class Scored:
    """One failed labelled episode: its configuration, label, the attribution's step and
    cause (with and without the record's unexecuted reply), the explanations fitting the
    decisive slot, its last failed call, and for a guess the share of wrong slots an
    explanation fits."""

    configuration: str
    cause: str
    step: int
    terminal: int
    predicted_step: int | None
    predicted_cause: str
    trace_step: int | None
    trace_cause: str
    fits: frozenset[str]
    last_failed: int | None
    guess_fit_share: float | None


def check(case: Case, decisions: Sequence[Decision]) -> list[str]:
    """The label's violations against the env's outcomes (module docstring)."""
    lab = case.label
    assert lab is not None
    where = f"{config_label(case.spec)} seed {case.trace.task_seed} ({lab.cause})"
    problems = []
    if case.record.success:
        problems.append(f"{where}: the episode succeeded")
    before = decisions[:lab.step]
    if any(d.failure is not None for d in before):
        problems.append(f"{where}: a call before the decisive step {lab.step} failed")
    if lab.cause in TEXT_FAILURE:
        if len(decisions) != lab.step or case.record.first_failure != TEXT_FAILURE[lab.cause]:
            problems.append(f"{where}: not {len(decisions)} executed calls then "
                            f"{TEXT_FAILURE[lab.cause]} (first failure "
                            f"{case.record.first_failure})")
        return problems
    after = decisions[lab.step:]
    allowance = case.spec.error_allowance
    if (len(after) != allowance + 1 or any(d.failure != ENV_FAILURE[lab.cause] for d in after)
            or lab.terminal != len(decisions) - 1):
        problems.append(f"{where}: calls {lab.step}.. are {[d.failure for d in after]}, not "
                        f"{allowance + 1} x {ENV_FAILURE[lab.cause]} ending at {lab.terminal}")
    if lab.cause in VALUE_CAUSES and after:
        decision = after[0]
        if decision.action != (lab.op, lab.slot):
            problems.append(f"{where}: the decisive call is {decision.action}, the label's "
                            f"({lab.op}, {lab.slot})")
        if lab.value not in explanation_values(decision)[lab.cause]:
            problems.append(f"{where}: value {lab.value} is no {lab.cause} of the replay "
                            f"({explanation_values(decision)[lab.cause]})")
    return problems


def score_case(case: Case) -> tuple[Scored, list[str]]:
    """A failed labelled case scored, and its label's violations."""
    lab = case.label
    assert lab is not None
    decisions = replay(case.trace)
    attributions = [attribute(d) for d in decisions]
    failed = [i for i, a in enumerate(attributions) if a.category != OK]
    trace_step = failed[0] if failed else None
    trace_cause = attributions[failed[0]].category if failed else NONE
    step, cause = trace_step, trace_cause
    unexecuted = {text: name for name, text in TEXT_FAILURE.items()}
    if not failed and case.record.first_failure in unexecuted:
        step, cause = len(decisions), unexecuted[case.record.first_failure]
    fits: frozenset[str] = frozenset()
    guess_share = None
    if lab.step < len(decisions):
        decisive = decisions[lab.step]
        fits = attributions[lab.step].explanations
        if lab.cause == GUESS:
            b = case.spec.candidates
            wrong = [a for a in range(b) if not _right(decisive, a)]
            fitting = sum(bool(attribute(dataclasses.replace(
                decisive, action=(decisive.action[0], a))).explanations) for a in wrong)
            guess_share = fitting / len(wrong)
    scored = Scored(config_label(case.spec), lab.cause, lab.step, lab.terminal, step, cause,
                    trace_step, trace_cause, fits, failed[-1] if failed else None, guess_share)
    return scored, check(case, decisions)


def _right(decision: Decision, slot: int) -> bool:
    """Whether `slot` is the right one at `decision` (its code is the queried register's
    current residue; known at every decision of the benchmark's configurations)."""
    current = decision.known[decision.query]
    return current is not None and decision.code(slot) == current % decision.spec.candidates


def kappa(labels: Sequence[str], predicted: Sequence[str]) -> tuple[float, float]:
    """Cohen's kappa of two labelings of the same items, and the chance agreement p_e."""
    n = len(labels)
    categories = sorted(set(labels) | set(predicted))
    observed = sum(a == b for a, b in zip(labels, predicted, strict=True)) / n
    first, second = Counter(labels), Counter(predicted)
    chance = sum(first[c] * second[c] for c in categories) / (n * n)
    return (1.0 if chance == 1.0 else (observed - chance) / (1.0 - chance)), chance


def kappa_interval(labels: Sequence[str], predicted: Sequence[str],
                   resamples: int = BOOTSTRAP, seed: int = BOOTSTRAP_SEED
                   ) -> tuple[float, float]:
    """The 95% bootstrap percentile interval of kappa over resampled episodes."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(labels), np.asarray(predicted)
    values = []
    for _ in range(resamples):
        take = rng.integers(len(a), size=len(a))
        values.append(kappa(a[take].tolist(), b[take].tolist())[0])
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _rate(hits: int, n: int) -> dict[str, Any]:
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "low": None, "high": None}
    low, high = wilson_interval(hits, n)
    return {"k": hits, "n": n, "rate": hits / n, "low": float(low), "high": float(high)}


def group_figures(rows: Sequence[Scored]) -> dict[str, Any]:
    """The figures of a group of scored episodes (module docstring)."""
    n = len(rows)
    labels = [r.cause for r in rows]
    predicted = [r.predicted_cause for r in rows]
    k, chance = kappa(labels, predicted) if n else (None, None)
    summary = {
        "episodes": n,
        "step": _rate(sum(r.predicted_step == r.step for r in rows), n),
        "step_trace_only": _rate(sum(r.trace_step == r.step for r in rows), n),
        "terminal": _rate(sum(r.last_failed == r.terminal for r in rows
                              if r.cause != INVALID_REPLY),
                          sum(r.cause != INVALID_REPLY for r in rows)),
        "cause": _rate(sum(a == b for a, b in zip(labels, predicted, strict=True)), n),
        "cause_trace_only": _rate(sum(r.trace_cause == r.cause for r in rows), n),
        "ambiguous": _rate(sum(r.predicted_cause == AMBIGUOUS for r in rows), n),
        "label_fits": _rate(sum(r.cause in r.fits for r in rows if r.cause in VALUE_CAUSES),
                            sum(r.cause in VALUE_CAUSES for r in rows)),
        "kappa": k,
        "chance_agreement": chance,
    }
    return summary


def score(cases: Sequence[Case], resamples: int = BOOTSTRAP) -> dict[str, Any]:
    """The benchmark's result from labelled cases: counts, label checks, overall figures
    with kappa's bootstrap interval, per cause, per configuration, the confusion matrix and
    the guess chance."""
    failed = [c for c in cases if not c.record.success]
    labelled = [c for c in failed if c.label is not None]
    scored, problems = [], []
    for case in labelled:
        row, violations = score_case(case)
        scored.append(row)
        problems.extend(violations)
    overall = group_figures(scored)
    if scored:
        overall["kappa_interval"] = kappa_interval([r.cause for r in scored],
                                                   [r.predicted_cause for r in scored],
                                                   resamples)
    predicted_names = sorted({r.predicted_cause for r in scored})
    confusion = {cause: {p: sum(r.cause == cause and r.predicted_cause == p for r in scored)
                         for p in predicted_names}
                 for cause in CAUSES if any(r.cause == cause for r in scored)}
    guesses = [r for r in scored if r.cause == GUESS and r.guess_fit_share is not None]
    masked: Counter[str] = Counter()
    not_injected: Counter[str] = Counter()
    for case in cases:
        counters = case.record.counters
        if "fault_cause" in counters:
            masked[str(counters["fault_cause"])] += int(counters["fault_masked"])
            not_injected[str(counters["fault_cause"])] += case.label is None
    return {
        "episodes": len(cases),
        "failed": len(failed),
        "labelled_failed": len(labelled),
        "unlabelled_failed": len(failed) - len(labelled),
        "not_injected": dict(not_injected),
        "labelled_succeeded": sum(c.label is not None and c.record.success for c in cases),
        "masked_draws": dict(masked),  # drawn faults whose slot was the right one
        "check_failures": problems,
        "overall": overall,
        "per_cause": {cause: group_figures([r for r in scored if r.cause == cause])
                      for cause in CAUSES if any(r.cause == cause for r in scored)},
        "per_configuration": {name: group_figures([r for r in scored if r.configuration == name])
                              for name in dict.fromkeys(r.configuration for r in scored)},
        "confusion": confusion,
        "guess_fit_expected": (float(np.mean([r.guess_fit_share for r in guesses]))
                               if guesses else None),
        "guess_fit_observed": _rate(sum(r.predicted_cause != GUESS for r in guesses),
                                    len(guesses)),
    }


def _cell(rate: dict[str, Any]) -> str:
    if rate["n"] == 0:
        return "-"
    return f"{rate['rate']:.3f} [{rate['low']:.2f}, {rate['high']:.2f}]"


def table(result: dict[str, Any]) -> str:
    """Markdown tables: per cause, per configuration, and the confusion matrix."""
    head = ("| {} | n | step | cause | ambiguous | label fits | kappa |\n"
            "| --- | --- | --- | --- | --- | --- | --- |")
    lines = []
    for title, groups in (("cause", result["per_cause"]),
                          ("configuration", result["per_configuration"])):
        lines.append(head.format(title))
        for name, s in [*groups.items(), ("all", result["overall"])]:
            k = "-" if s["kappa"] is None or title == "cause" and name != "all" \
                else f"{s['kappa']:.3f}"
            lines.append(f"| {name} | {s['episodes']} | {_cell(s['step'])} | "
                         f"{_cell(s['cause'])} | {_cell(s['ambiguous'])} | "
                         f"{_cell(s['label_fits'])} | {k} |")
        lines.append("")
    predicted = sorted({p for row in result["confusion"].values() for p in row})
    lines.append("| label \\ attribution | " + " | ".join(predicted) + " |")
    lines.append("| --- |" + " --- |" * len(predicted))
    for cause, row in result["confusion"].items():
        lines.append(f"| {cause} | " + " | ".join(str(row[p]) for p in predicted) + " |")
    return "\n".join(lines)
