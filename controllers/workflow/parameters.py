"""Seed 003's reference controllers as data: the parameter row of each name, and what
each field means (controllers/workflow/mechanisms.py is the logic that reads them).

Why a module of its own: the names are listed by every help page and argument error of the
command line, which must not wait for numba to import (about 1 s; the kernels that read the
rows are compiled in mechanisms.py). The rows' constants are compiled into those kernels, so
this file is one of the sources the kernel cache is keyed by (it names numba_setup, the marker
envs/_core/numba_setup.py looks for).
"""

from __future__ import annotations

# -- controller parameters ------------------------------------------------------------------
K_RETAIN, K_CAPACITY, K_SCAN, K_SELECT, K_ELIMINATE, K_RANDOM_SCHEDULE, K_LAPSE, \
    K_PERSEVERATE, K_SCHEDULE_LAPSE, K_UPDATE_DELAY, K_UPDATE_MISS, K_OFFSET = range(12)
ROW_FIELDS = 12

# What a controller retains between decisions.
RETAIN_ALL, RETAIN_CACHE, RETAIN_NONE, RETAIN_STALE, RETAIN_NEXT_USE, RETAIN_RESIDUE, \
    RETAIN_PLAN = range(7)
# How it selects a candidate once it has a value.
SELECT_SERIAL, SELECT_FIXED, SELECT_SHAM, SELECT_INDEXED, SELECT_PLAN, SELECT_GUESS = range(6)

UNLIMITED = 8  # scan limit >= every b
# K_LAPSE is the lapse rate epsilon in parts of LAPSE_SCALE: an int64 row like the others, and
# a Bernoulli draw against it is exact (uniform_below(LAPSE_SCALE) < lapse). The failure modes
# after it are the diagnosis's too (docs/CONTROLLERS.md, "Failure modes"), 0 for every
# reference controller: K_PERSEVERATE (probability, in parts of LAPSE_SCALE, that the call
# after a failed one repeats it), K_SCHEDULE_LAPSE (probability that a decision runs a
# not-ready operation when there is one), K_UPDATE_DELAY and K_UPDATE_MISS (probabilities that
# a success's public update is applied one decision late, or never), K_OFFSET (the slot taken
# is the one whose code is that many above the chosen slot's code, mod b).
LAPSE_SCALE = 10_000
NO_FAILURE_MODES = (0, 0, 0, 0, 0)

# name: (retain, capacity, scan limit, select, eliminate, random schedule, lapse)
_MECHANISMS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "exact": (RETAIN_ALL, 8, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "cache-2": (RETAIN_CACHE, 2, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "cache-4": (RETAIN_CACHE, 4, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "scan-1": (RETAIN_ALL, 8, 1, SELECT_SERIAL, 0, 0, 0),
    "scan-2": (RETAIN_ALL, 8, 2, SELECT_SERIAL, 0, 0, 0),
    "scan-4": (RETAIN_ALL, 8, 4, SELECT_SERIAL, 0, 0, 0),
    "cache-2+scan-4": (RETAIN_CACHE, 2, 4, SELECT_SERIAL, 0, 0, 0),
    "random-schedule": (RETAIN_ALL, 8, UNLIMITED, SELECT_SERIAL, 0, 1, 0),
    "uniform-candidate": (RETAIN_NONE, 0, UNLIMITED, SELECT_GUESS, 0, 0, 0),
    "next-use-2": (RETAIN_NEXT_USE, 2, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "residue-8": (RETAIN_RESIDUE, 8, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "precomputed-plan": (RETAIN_PLAN, 0, UNLIMITED, SELECT_PLAN, 0, 0, 0),
    "stale-8": (RETAIN_STALE, 8, UNLIMITED, SELECT_SERIAL, 0, 0, 0),
    "indexed": (RETAIN_ALL, 8, UNLIMITED, SELECT_INDEXED, 0, 0, 0),
    "sham-check-4": (RETAIN_ALL, 8, 4, SELECT_SHAM, 0, 0, 0),
    "fixed-check-4": (RETAIN_ALL, 8, 4, SELECT_FIXED, 0, 0, 0),
    "eliminate": (RETAIN_NONE, 0, UNLIMITED, SELECT_GUESS, 1, 0, 0),
    "cache-2+eliminate": (RETAIN_CACHE, 2, UNLIMITED, SELECT_SERIAL, 1, 0, 0),
    "scan-1+eliminate": (RETAIN_ALL, 8, 1, SELECT_SERIAL, 1, 0, 0),
}
CONTROLLERS: dict[str, tuple[int, ...]] = {
    name: (*row, *NO_FAILURE_MODES) for name, row in _MECHANISMS.items()}
CONTROLLER_NAMES = tuple(CONTROLLERS)
