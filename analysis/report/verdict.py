"""The diagnosis a page opens with: its headline sentence, its absolute fit test and its
component verdicts, each verdict split into its finding, the evidence it cites and the
intervals it states, read from a diagnosis JSON of either env family.

Why first: a reader of a diagnosis page asks "what is wrong with this agent, and is the answer
trustworthy" before any table of runs; the headline says which hypothesis, the fit test says
whether it explains the outcomes at all, and the components say what breaks. The JSON is the
contract of analysis/diagnose/report.py (`to_json`); this module reads it and
never recomputes a verdict. The contract carries each component's verdict as one sentence
("component: finding; evidence; evidence"), so the finding, the evidence clauses and the
intervals are the sentence's own parts, split at its top-level "; " and its parenthesised
"interval a..b" groups, with no word changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from diagym.analysis.diagnose.dacs.verdicts import COMPONENTS as DACS_COMPONENTS
from diagym.analysis.diagnose.honesty import FitTest
from diagym.analysis.diagnose.verdicts import COMPONENTS as WORKFLOW_COMPONENTS
from diagym.analysis.report.model import Clauses, Facts, Item, Lead, Table, Text

FITS, OUTSIDE = "fits", "outside"
INTERVAL = re.compile(r"\binterval\b")


def top_level_clauses(text: str) -> list[str]:
    """`text` split at each "; " outside parentheses and brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    return parts


def stated_intervals(clause: str) -> list[str]:
    """Each parenthesised group of `clause` that states an interval, with what it bounds: the
    clause's text from its last top-level ": " (or the previous such group) to the group's
    end. "the best fit reads: a cache of about 2 registers (cache-k MLE 2, interval 1..2)"
    gives "a cache of about 2 registers (cache-k MLE 2, interval 1..2)"."""
    found, depth, start, opened = [], 0, 0, 0
    for i, char in enumerate(clause):
        if char in "([":
            opened = i if depth == 0 else opened
            depth += 1
        elif char in ")]" and depth:
            depth -= 1
            if depth == 0 and char == ")" and INTERVAL.search(clause, opened, i):
                found.append(clause[start:i + 1].strip())
                start = i + 1
        elif depth == 0 and clause.startswith(": ", i):
            start = i + 2
    return found


def component_row(component: str, sentence: str) -> tuple[str, str, Clauses, Clauses]:
    """(component, finding, evidence clauses, stated intervals) of one verdict sentence."""
    head, sep, body = sentence.partition(": ")
    if not sep or head != component:
        body = sentence
    clauses = [c for c in top_level_clauses(body) if c] or ["-"]
    intervals = tuple(i for c in clauses for i in stated_intervals(c))
    return component, clauses[0], Clauses(tuple(clauses[1:])), Clauses(intervals)


def _order(verdicts: Mapping[str, Any], dacs: bool) -> list[str]:
    known = DACS_COMPONENTS if dacs else WORKFLOW_COMPONENTS
    return [c for c in known if c in verdicts] + sorted(c for c in verdicts if c not in known)


def _counted(data: Mapping[str, Any], dacs: bool) -> str:
    evidence = data.get("evidence") or {}
    configurations = len(data.get("configurations") or [])
    text = f"{data.get('episodes')} episodes over {configurations} battery configurations"
    if dacs:
        text += f", {data.get('decisions')} answers"
    if evidence:
        text += (f"; {evidence.get('with_env_outcome')} ended with an env outcome, "
                 f"{evidence.get('failed_calls')} "
                 + ("wrong answers" if dacs else "failed calls"))
    invalid = data.get("invalid") or {}
    if invalid:
        text += "; invalid replies: " + ", ".join(f"{n} {k}" for k, n in sorted(invalid.items()))
    design = data.get("design")
    if isinstance(design, Mapping) and design.get("mode") == "adaptive":
        text += (f"; adaptive design: stopped ({design.get('stopped')}) with "
                 f"{design.get('leader')} at posterior {design.get('leader_posterior')} over "
                 f"{design.get('posterior_over')}")
    return text + "."


def _fit_items(fit: Mapping[str, Any] | None, dacs: bool) -> list[Item]:
    if fit is None:
        return [Text("Fit test", "No fit test: nothing was fitted (the headline says why).",
                     preformatted=False)]
    test = FitTest.from_json(fit)
    statistic = ("the agent's answers scored against the reader's choice distribution" if dacs
                 else "G-squared of the outcome counts per configuration")
    return [Facts("Fit test", (
        ("hypothesis", test.hypothesis),
        ("statistic", f"{test.statistic:.1f} ({statistic})"),
        ("expected", f"{test.expected:.1f} (the median of {test.replicates} replicates of "
                     f"{test.hypothesis} with the agent's counts)"),
        ("p", test.p_text()),
        ("verdict", fit.get("verdict", test.verdict)),
        ("outside their 95% band", ", ".join(test.outside) or "none"),
    ))]


def verdict_items(data: Mapping[str, Any]) -> list[Item]:
    """The headline, the counts behind it, the fit test and the component verdicts of a
    diagnosis JSON, in that order."""
    dacs = "decisions" in data and "hypothesis" in data
    fit = data.get("fit")
    tone = "" if not isinstance(fit, Mapping) else (
        FITS if fit.get("verdict") == "fits" else OUTSIDE)
    items: list[Item] = [Lead("Headline", str(data.get("headline", "-")), tone,
                              note=_counted(data, dacs))]
    mixture = data.get("mixture")
    if isinstance(mixture, Mapping) and mixture.get("components"):
        parts = " and ".join(f"{name} ({weight:.0%})" for name, weight in
                             zip(mixture["components"], mixture["weights"], strict=True))
        items.append(Text("", f"A per-episode mixture of {parts} beats the single best.",
                          preformatted=False))
    items += _fit_items(fit if isinstance(fit, Mapping) else None, dacs)
    verdicts = data.get("verdicts") or {}
    if verdicts:
        rows: Sequence[tuple[Any, ...]] = tuple(component_row(c, str(verdicts[c]))
                                                for c in _order(verdicts, dacs))
        items.append(Table("Components", ("component", "verdict", "evidence",
                                          "intervals stated"), tuple(rows),
                           note="Each verdict as the diagnosis words it, split into its finding "
                                "and the evidence it cites, and the 95% intervals it states."))
    return items
