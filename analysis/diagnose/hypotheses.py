"""The mechanisms an agent's episodes are fitted against: the reference controllers and
parameterised families around them, each a parameter row of controllers/workflow/mechanisms.py.

A family puts a named controller among its neighbours (cache-2 among cache-0..8), so a fit
can say "a cache of about 3" for an agent no reference controller matches, with an interval.
Every member is a row of the one CONTROLLERS parameter space, played by the one decision
function; nothing here is a second copy of a controller.

The table cannot express stale-h (RETAIN_STALE ignores its capacity field: stale-8 is the
only stale mechanism), so it is no family here. A lapse rate is the row's K_LAPSE field; every
hypothesis here has epsilon 0, and likelihood.fit_lapse screens it on every hypothesis.

The failure modes small language models and RL agents show beyond the controllers (the row's fields
after K_LAPSE, docs/CONTROLLERS.md) are families on exact, each over a few values of its
probability or offset (percent for probabilities, so a parameter stays an int): perseverate-p
(a retry repeats the failed call), schedule-lapse-rho (a not-ready operation), update-delay-q
and update-miss-q (a public update applied one decision late, or never), offset-o (the slot of
the code o above the right one; every offset fails every call, so the outcomes cannot tell
the offsets apart and the model merges them into offset+1 with aliases). On exact, so each
mode is the only deficit of its rows: 17 rows instead of a product with every retention and
selection, which keeps the model's build and the lapse screen near their cost without them;
an agent with a failure mode on top of another deficit is what the fit test (and the
mixtures) are for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagym.controllers.workflow.parameters import (
    CONTROLLERS,
    K_OFFSET,
    K_PERSEVERATE,
    K_SCHEDULE_LAPSE,
    K_UPDATE_DELAY,
    K_UPDATE_MISS,
    LAPSE_SCALE,
    NO_FAILURE_MODES,
    RETAIN_ALL,
    RETAIN_CACHE,
    RETAIN_NEXT_USE,
    SELECT_SERIAL,
    UNLIMITED,
)

Row = tuple[int, ...]
REFERENCE = "reference"
# The families whose parameter a diagnosis reports with its interval (run.py fits each; the
# verdicts cite it), and so the ones the battery is chosen to identify besides the controllers.
FITTED_FAMILIES = ("cache-k", "scan-s")
LEVELS = tuple(range(UNLIMITED + 1))  # cache sizes and scan limits 0..8 (8: every slot)
# Failure-mode families: (field, parameter name, values; probabilities in percent).
FAILURE_MODES: dict[str, tuple[int, str, tuple[int, ...]]] = {
    "perseverate-p": (K_PERSEVERATE, "p", (25, 50, 75, 100)),
    "schedule-lapse-rho": (K_SCHEDULE_LAPSE, "rho", (5, 10, 20, 30, 50)),
    "update-delay-q": (K_UPDATE_DELAY, "q", (50, 100)),
    "update-miss-q": (K_UPDATE_MISS, "q", (25, 50, 100)),
    "offset-o": (K_OFFSET, "o", (1, -1, 2)),
}


@dataclass(frozen=True)
class Mechanism:
    """One hypothesis: a parameter row, named after the controller or family member it is."""

    name: str
    family: str
    params: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    row: Row = (0, 0, 0, 0, 0, 0, 0, *NO_FAILURE_MODES)


def _serial(retain: int, capacity: int, scan: int, eliminate: int = 0,
            random_schedule: int = 0) -> Row:
    return (retain, capacity, scan, SELECT_SERIAL, eliminate, random_schedule, 0,
            *NO_FAILURE_MODES)


def with_failure_mode(row: Row, family: str, value: int) -> Row:
    """`row` with the failure mode of FAILURE_MODES[family] at `value` (percent for a
    probability, slots for an offset)."""
    field_index, _, _ = FAILURE_MODES[family]
    units = value if field_index == K_OFFSET else value * LAPSE_SCALE // 100
    return (*row[:field_index], units, *row[field_index + 1:])


def _failure_mode_family(family: str) -> list[Mechanism]:
    _, key, values = FAILURE_MODES[family]
    stem = family.rsplit("-", 1)[0]
    return [Mechanism(f"{stem}{v:+d}" if key == "o" else f"{stem}-{v / 100:g}", family,
                      {key: v}, with_failure_mode(CONTROLLERS["exact"], family, v))
            for v in values]


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
        **{family: _failure_mode_family(family) for family in FAILURE_MODES},
    }


def reference_mechanisms() -> list[Mechanism]:
    """The reference controllers, in the table's order."""
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
