"""Per-component verdicts in words: what the fit says breaks an agent, and on what evidence.

A ranked list of mechanisms answers "which controller is this agent most like"; a user asks
"what is wrong with it". The four components of a reference controller's row answer that one
at a time: scheduling (the random-schedule field), retention (what it keeps and how much),
selection (scan limit and selection rule, and a lapse to a uniform slot), recovery
(elimination of failed slots). Each verdict reads the best mechanism's fields for that
component, and weighs them by

- the log likelihood ratio against the best-ranked alternative that differs in that component,
  preferring one that differs in nothing else (cache-3 against cache-2, not against scan-4), so
  the ratio measures that component alone where the hypotheses allow it;
- the family fit that holds the best mechanism (cache-k for a cache: its MLE and interval);
- the fitted lapse rate and its interval (selection);
- the attribution tally, when there are traces: dependency and completed failures for
  scheduling, the split of wrong slots (guess, stale value, binding, initial value) for
  retention and a scan limit, each set against the count a uniform guesser would show on the
  same decisions (honesty.ChanceCount): "binding: 97% against 84% by chance", or "no excess
  over guessing", since at small b a guess matches some register's value most of the time.

A component whose best value is the one exact has says "no deficit"; one with no alternative
to weigh it against, or an alternative fitting exactly as well, says "no evidence" (an agent
that retains nothing shows no scan limit; no episodes show nothing). A ratio below
INTERVAL_LOG_UNITS is marked weak: it is inside the 95% interval of a one-parameter choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from diagym.analysis.diagnose.attribution import (
    AMBIGUOUS,
    EXPLANATIONS,
    GUESS,
    INITIAL,
    STALE,
    WRONG_REGISTER,
    Tally,
)
from diagym.analysis.diagnose.honesty import (
    ChanceCount,
    beats_words,
    first_differing,
    lapse_words,
    log_lr,
)
from diagym.analysis.diagnose.honesty import join_clauses as _join
from diagym.analysis.diagnose.hypotheses import Row, families
from diagym.analysis.diagnose.likelihood import INTERVAL_LOG_UNITS, LAPSE_GRID, FamilyFit, Fit
from diagym.controllers.workflow.parameters import (
    CONTROLLERS,
    K_CAPACITY,
    K_ELIMINATE,
    K_OFFSET,
    K_PERSEVERATE,
    K_RANDOM_SCHEDULE,
    K_RETAIN,
    K_SCAN,
    K_SCHEDULE_LAPSE,
    K_SELECT,
    K_UPDATE_DELAY,
    K_UPDATE_MISS,
    LAPSE_SCALE,
    RETAIN_CACHE,
    RETAIN_NEXT_USE,
    RETAIN_NONE,
    RETAIN_PLAN,
    RETAIN_RESIDUE,
    RETAIN_STALE,
    SELECT_FIXED,
    SELECT_GUESS,
    SELECT_PLAN,
    SELECT_SHAM,
    UNLIMITED,
)

COMPONENTS = ("scheduling", "retention", "selection", "recovery")
# A fitted lapse whose interval starts at this rate or above is where most slots are uniform
# by hypothesis: a memory of fewer registers (whose other slots are guesses) is then absorbed
# into the lapse, so the retention verdict makes no claim (a user's agent keeping 2 registers
# fitted exact-retention at lapse 0.8 and read "no deficit").
LAPSE_HIDES = 0.5
FIELDS: dict[str, tuple[int, ...]] = {
    "scheduling": (K_RANDOM_SCHEDULE, K_SCHEDULE_LAPSE),
    "retention": (K_RETAIN, K_CAPACITY, K_UPDATE_DELAY, K_UPDATE_MISS),
    "selection": (K_SCAN, K_SELECT, K_OFFSET),
    "recovery": (K_ELIMINATE, K_PERSEVERATE),
}
COMPONENT_FIELDS = tuple(f for c in COMPONENTS for f in FIELDS[c])
EXACT = CONTROLLERS["exact"]
# Words for the wrong-slot explanations of the tally, in the order they are listed.
FAILURE_WORDS = {
    GUESS: "fit no known value (a guess)",
    STALE: "a stale value (stale state)",
    WRONG_REGISTER: "another register's value (binding)",
    INITIAL: "the initial value",
    AMBIGUOUS: "several explanations",
}


def _share(units: int) -> str:
    return f"{units / LAPSE_SCALE:.0%}"


def _part(row: Row, component: str) -> tuple[int, ...]:
    return tuple(row[f] for f in FIELDS[component])


def _healthy(row: Row, component: str) -> bool:
    """The component as exact has it (an unlimited scan is any scan limit of UNLIMITED)."""
    if component == "selection":
        return row[K_SCAN] >= UNLIMITED and row[K_SELECT] == EXACT[K_SELECT] \
            and row[K_OFFSET] == 0
    return _part(row, component) == _part(EXACT, component)


def rival(ranked: Sequence[Fit], component: str) -> Fit | None:
    """The best-ranked fit whose row differs from the best's in `component`: first among those
    equal in every other component, else among all (None if no fit differs there)."""
    best = ranked[0].mechanism.row
    others = [f for f in COMPONENT_FIELDS if f not in FIELDS[component]]
    controlled = [ranked[0], *(f for f in ranked[1:]
                               if all(f.mechanism.row[i] == best[i] for i in others))]

    def trait(f: Fit) -> tuple[int, ...]:
        return _part(f.mechanism.row, component)

    return first_differing(controlled, trait) or first_differing(ranked, trait)


def _ratio(best: Fit, other: Fit | None) -> tuple[float, str]:
    """(log-LR of the best over `other`, the clause saying so)."""
    if other is None:
        return 0.0, ""
    # the data's own log-LR, not the ranking's: a failure mode's ranking score carries a
    # parsimony penalty, which is no evidence against it
    lr = log_lr(best.log_likelihood, other.log_likelihood)
    if lr < 0.0:  # a failure mode ahead by less than its parsimony penalty
        return lr, f"{other.mechanism.name} fits better by log-LR {-lr:.1f}, less than its " \
                   f"extra parameter needs ({INTERVAL_LOG_UNITS:.2f}), weak evidence"
    return lr, beats_words(best.mechanism.name, other.mechanism.name, lr)


def _family_clause(best: Fit, family_fits: Mapping[str, FamilyFit], key: str) -> str:
    """'(cache-k MLE 3, interval 2..4)' from the first family holding the best mechanism."""
    names = set(best.names)
    for family, members in families().items():
        if family in family_fits and key in members[0].params \
                and any(m.name in names for m in members):
            found = family_fits[family]
            low, high = found.intervals[key]
            return f"{family} MLE {found.params[key]}, interval {low}..{high}"
    return ""


def _about(count: int, best: Fit, family_fits: Mapping[str, FamilyFit], key: str) -> str:
    """'2' when the family interval is that one value, else 'about 2'."""
    names = set(best.names)
    for family, members in families().items():
        if family in family_fits and key in members[0].params \
                and any(m.name in names for m in members):
            low, high = family_fits[family].intervals[key]
            return str(count) if low == high == count else f"about {count}"
    return f"about {count}"


def _candidate_failures(tally: Tally | None,
                        chance: Mapping[str, ChanceCount] | None = None) -> tuple[int, str]:
    """(wrong slots in the tally, their split in words, largest first, each set against
    guessing where `chance` has it)."""
    if tally is None:
        return 0, ""
    keys = (*EXPLANATIONS, GUESS, AMBIGUOUS)
    total = sum(tally.counts.get(k, 0) for k in keys)
    if total == 0:
        return 0, "no candidate failures in the traces"
    parts = sorted(((tally.counts.get(k, 0), k) for k in keys if tally.counts.get(k, 0)),
                   key=lambda p: (-p[0], keys.index(p[1])))
    words = []
    for n, k in parts:
        against = chance.get(k) if chance else None
        words.append(f"{n} {FAILURE_WORDS[k]}" if against is None else
                     f"{n} {FAILURE_WORDS[k]} [{against.words(k.replace('_', ' '))}]")
    return total, f"of {total} candidate failures {', '.join(words)}"


def _no_evidence(component: str, best: Fit, other: Fit | None, lr: float) -> str | None:
    if other is None:
        return f"no evidence: no fitted alternative differs from {best.mechanism.name} in " \
               f"{component}"
    if abs(lr) <= 1e-9:
        return f"no evidence: {best.mechanism.name} and {other.mechanism.name} fit equally " \
               f"(log-LR {lr + 0.0:.1f})"
    return None


def _scheduling(ranked: Sequence[Fit], tally: Tally | None) -> str:
    best = ranked[0]
    other = rival(ranked, "scheduling")
    lr, ratio = _ratio(best, other)
    counts = "" if tally is None else _scheduling_counts(tally)
    empty = _no_evidence("scheduling", best, other, lr)
    if empty is not None:
        return _join(empty, counts)
    if best.mechanism.row[K_RANDOM_SCHEDULE]:
        finding = "picks operations at random among the incomplete ones, ignoring prerequisites"
    elif best.mechanism.row[K_SCHEDULE_LAPSE]:
        rho = _share(best.mechanism.row[K_SCHEDULE_LAPSE])
        finding = f"runs a not-ready operation on about {rho} of its decisions (a schedule " \
                  "lapse), otherwise a ready one"
    else:
        finding = "no deficit: runs a ready operation, prerequisites first"
    return _join(finding, counts, ratio)


def _scheduling_counts(tally: Tally) -> str:
    dependency = tally.counts.get("dependency", 0)
    completed = tally.counts.get("completed", 0)
    failed = sum(tally.counts.values())
    text = f"{dependency} of {failed} failed calls were dependency failures"
    if completed:
        text += f" and {completed} repeated a completed operation (bookkeeping)"
    return text


def _retention(ranked: Sequence[Fit], family_fits: Mapping[str, FamilyFit],
               tally: Tally | None, chance: Mapping[str, ChanceCount] | None = None) -> str:
    best = ranked[0]
    row = best.mechanism.row
    other = rival(ranked, "retention")
    lr, ratio = _ratio(best, other)
    _, failures = _candidate_failures(tally, chance)
    empty = _no_evidence("retention", best, other, lr)
    if empty is not None:
        return _join(empty, failures)
    retain, capacity = row[K_RETAIN], row[K_CAPACITY]
    family = ""
    if _healthy(row, "retention"):
        finding = "no deficit: keeps every register and applies the public updates"
    elif row[K_UPDATE_MISS]:
        finding = f"keeps every register but misses about {_share(row[K_UPDATE_MISS])} of the " \
                  "public updates"
    elif row[K_UPDATE_DELAY]:
        finding = f"keeps every register but applies about {_share(row[K_UPDATE_DELAY])} of the " \
                  "public updates one decision late"
    elif retain == RETAIN_CACHE:
        finding = f"a cache of {_about(capacity, best, family_fits, 'k')} registers"
        family = _family_clause(best, family_fits, "k")
    elif retain == RETAIN_NEXT_USE:
        finding = f"an adaptive cache of {_about(capacity, best, family_fits, 'k')} registers " \
                  "chosen by next use, held as residues"
        family = _family_clause(best, family_fits, "k")
    elif retain == RETAIN_NONE:
        finding = "retains no register value: every slot is a guess"
    elif retain == RETAIN_STALE:
        finding = "stale state: uses the last shown values and never applies the updates"
    elif retain == RETAIN_RESIDUE:
        finding = "keeps only residues mod b, which updates mod 8 put out of step"
    elif retain == RETAIN_PLAN:
        finding = "retains nothing at execution: follows a plan precomputed from the initial " \
                  "state"
    else:
        finding = f"retention rule {retain}"
    finding += f" ({family})" if family else ""
    hidden = best.epsilon_interval is not None and best.epsilon_interval[0] >= LAPSE_HIDES
    if hidden:
        finding = (f"no claim: the best fit lapses to a uniform slot on about "
                   f"{best.epsilon:.0%} of decisions, and a memory of fewer registers gives "
                   f"uniform slots too; on the other decisions it reads: "
                   f"{finding.removeprefix('no deficit: ')}")
    return _join(finding, failures, ratio)


def _lapse_clause(best: Fit) -> str:
    if best.epsilon_interval is None:
        return ""
    return lapse_words(best.epsilon, best.epsilon_interval, LAPSE_GRID[1], "slot",
                       "decisions")


def _selection(ranked: Sequence[Fit], family_fits: Mapping[str, FamilyFit],
               tally: Tally | None) -> str:
    best = ranked[0]
    row = best.mechanism.row
    other = rival(ranked, "selection")
    lr, ratio = _ratio(best, other)
    lapse = _lapse_clause(best)
    if row[K_RETAIN] == RETAIN_NONE and row[K_SELECT] == SELECT_GUESS:
        return "no evidence: with no value retained every slot is a guess, so neither a " \
               "selection rule nor a lapse to a uniform slot shows"
    empty = _no_evidence("selection", best, other, lr)
    if empty is not None:
        return _join(empty, lapse)
    select, scan = row[K_SELECT], row[K_SCAN]
    total, _ = _candidate_failures(tally)
    guesses = "" if not total else \
        f"{tally.counts.get(GUESS, 0)} of {total} candidate failures fit no known value"  # type: ignore[union-attr]
    if _healthy(row, "selection"):
        finding = "no deficit: examines every slot until the code matches"
        guesses = ""
        if best.epsilon > 0.0 and best.epsilon_interval is not None \
                and best.epsilon_interval[0] > 0.0:
            finding = f"{lapse}, otherwise examines every slot"
            lapse = ""
    elif row[K_OFFSET]:
        finding = f"takes the slot whose code is {row[K_OFFSET]:+d} from the right one (a " \
                  "systematic encoding offset; the outcomes cannot tell which offset)"
    elif select == SELECT_PLAN:
        finding = "takes the planned slot without checking it"
    elif select in (SELECT_SHAM, SELECT_FIXED):
        finding = f"checks slots but takes a match among the first " \
                  f"{1 if select == SELECT_SHAM else scan} only"
    else:
        family = _family_clause(best, family_fits, "s")
        finding = f"scans only the first {scan} slots, then guesses among the rest" \
                  + (f" ({family})" if family else "")
    return _join(finding, lapse, guesses, ratio)


def _recovery(ranked: Sequence[Fit]) -> str:
    best = ranked[0]
    other = rival(ranked, "recovery")
    lr, ratio = _ratio(best, other)
    empty = _no_evidence("recovery", best, other, lr)
    if empty is not None:
        return empty
    if best.mechanism.row[K_PERSEVERATE]:
        finding = f"repeats the failed call on about {_share(best.mechanism.row[K_PERSEVERATE])} " \
                  "of its retries (perseveration)"
    elif best.mechanism.row[K_ELIMINATE]:
        finding = "eliminates the slots that failed when it retries an operation"
    else:
        finding = "no deficit: retries draw again as exact does, failed slots not excluded"
    return _join(finding, ratio)


def verdicts(ranked: Sequence[Fit], family_fits: Mapping[str, FamilyFit],
             tally: Tally | None,
             chance: Mapping[str, ChanceCount] | None = None) -> dict[str, str]:
    """One sentence per component (COMPONENTS), from the ranked fits (best first; fit or
    fit_lapse), the family fits by family name (any subset of families()), the attribution
    tally (None without traces) and its causes against chance (honesty.against_chance)."""
    if not ranked:
        raise ValueError("verdicts need at least one fitted mechanism")
    found = {
        "scheduling": _scheduling(ranked, tally),
        "retention": _retention(ranked, family_fits, tally, chance),
        "selection": _selection(ranked, family_fits, tally),
        "recovery": _recovery(ranked),
    }
    return {component: f"{component}: {found[component]}" for component in COMPONENTS}
