"""The mechanisms an agent's episodes are fitted against: the 19 reference controllers and
parameterised families around them, each a parameter row of controllers/workflow/mechanisms.py.

A family puts a named controller among its neighbours (cache-2 among cache-0..8), so a fit
can say "a cache of about 3" for an agent no reference controller matches, with an interval.
Every member is a row of the one CONTROLLERS parameter space, played by the one decision
function; nothing here is a second copy of a controller.

The table cannot express stale-h (RETAIN_STALE ignores its capacity field: stale-8 is the
only stale mechanism), so it is no family here. A lapse rate is the row's last field; every
hypothesis here has epsilon 0, and likelihood.fit_lapse mixes it into the leading ones only,
so the model stays cheap to build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controllers.workflow.mechanisms import (
    CONTROLLERS,
    RETAIN_ALL,
    RETAIN_CACHE,
    RETAIN_NEXT_USE,
    SELECT_SERIAL,
    UNLIMITED,
)

Row = tuple[int, int, int, int, int, int, int]
REFERENCE = "reference"
LEVELS = tuple(range(UNLIMITED + 1))  # cache sizes and scan limits 0..8 (8: every slot)


@dataclass(frozen=True)
class Mechanism:
    """One hypothesis: a parameter row, named after the controller or family member it is."""

    name: str
    family: str
    params: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    row: Row = (0, 0, 0, 0, 0, 0, 0)


def _serial(retain: int, capacity: int, scan: int, eliminate: int = 0,
            random_schedule: int = 0) -> Row:
    return (retain, capacity, scan, SELECT_SERIAL, eliminate, random_schedule, 0)


def families() -> dict[str, list[Mechanism]]:
    """Family name -> its members in parameter order (not deduplicated: a family's likelihood
    profile needs every value of its parameter, aliases included)."""
    return {
        "cache-k": [Mechanism(f"cache-{k}", "cache-k", {"k": k},
                              _serial(RETAIN_CACHE, k, UNLIMITED)) for k in LEVELS],
        "scan-s": [Mechanism(f"scan-{s}", "scan-s", {"s": s}, _serial(RETAIN_ALL, 8, s))
                   for s in LEVELS],
        "cache-k+scan-s": [Mechanism(f"cache-{k}+scan-{s}", "cache-k+scan-s", {"k": k, "s": s},
                                     _serial(RETAIN_CACHE, k, s)) for k in LEVELS for s in LEVELS],
        "cache-k+eliminate": [Mechanism(f"cache-{k}+eliminate", "cache-k+eliminate", {"k": k},
                                        _serial(RETAIN_CACHE, k, UNLIMITED, eliminate=1))
                              for k in LEVELS],
        "scan-s+eliminate": [Mechanism(f"scan-{s}+eliminate", "scan-s+eliminate", {"s": s},
                                       _serial(RETAIN_ALL, 8, s, eliminate=1)) for s in LEVELS],
        "random-schedule+cache-k": [
            Mechanism(f"random-schedule+cache-{k}", "random-schedule+cache-k", {"k": k},
                      _serial(RETAIN_CACHE, k, UNLIMITED, random_schedule=1)) for k in LEVELS
        ],
        "next-use-k": [Mechanism(f"next-use-{k}", "next-use-k", {"k": k},
                                 _serial(RETAIN_NEXT_USE, k, UNLIMITED)) for k in LEVELS],
    }


def reference_mechanisms() -> list[Mechanism]:
    """The 19 reference controllers, in the table's order."""
    return [Mechanism(name, REFERENCE, {}, row) for name, row in CONTROLLERS.items()]


def hypotheses() -> tuple[list[Mechanism], dict[str, tuple[str, ...]]]:
    """(mechanisms with distinct rows, aliases): the reference controllers first, then every
    family member whose row is new; aliases maps a kept name to the other names of its row
    (cache-8+scan-4 is not an alias of scan-4 here: the rows differ, the play may not; the
    model finds play aliases on its battery)."""
    kept: dict[Row, Mechanism] = {}
    others: dict[str, list[str]] = {}
    for mechanism in [*reference_mechanisms(), *(m for f in families().values() for m in f)]:
        first = kept.setdefault(mechanism.row, mechanism)
        if first is not mechanism and mechanism.name != first.name:
            names = others.setdefault(first.name, [])
            if mechanism.name not in names:
                names.append(mechanism.name)
    return list(kept.values()), {name: tuple(names) for name, names in others.items()}
