"""The parameters of a StatefulWorkflow task family, validated once, in one place.

Every knob of seed 003's primary and follow-on studies is a field here, so an env, a vector
env, a grid row and a command-line flag all mean the same thing by the same name. A bad value
fails at construction with a ValueError that names the parameter and what is allowed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

FAMILIES = ("chains", "barriers")
LOCALITIES = ("balanced", "clustered", "concentrated")
UPDATES = ("additive", "static")
LABELS = ("random", "reversed")

MAX_OPS = 32
REGISTER_SLOTS = 8
REGISTER_VALUES = 8

# Positions in the int64 parameter vector handed to the numba kernels.
P_N, P_DEPTH, P_FAMILY, P_WIDTH, P_B, P_PERIOD, P_HIDDEN, P_R, P_LOCALITY, P_UPDATES, P_LABELS = (
    range(11)
)
N_PARAMS = 11


def _check_int(name: str, value: Any, low: int, high: int | None, allowed: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer ({allowed}); got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {allowed}; got {value}")
    return value


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        allowed = " | ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
    return str(value)


@dataclass(frozen=True)
class WorkflowSpec:
    """One level of every factor of the workflow task family (seed 003, sections 3 and 7).

    family: "chains" (N/depth disjoint chains) or "barriers" (depth layers, each depending on
        all of the previous layer).
    n_ops: N, the number of operations, 1..32 (the paper uses 4, 8, 16).
    depth: longest prerequisite chain in nodes; must divide n_ops.
    width: active registers w, 1..8.
    candidates: b, candidate slots per operation, 2..8.
    snapshot_period: h; 0 shows registers only initially (the paper's "history"), 1 after every
        success ("snapshot"), h > 1 after every h-th success.
    hidden_resampling: after each success, active registers are redrawn, unseen until a snapshot.
    error_allowance: R; failed calls tolerated before the episode ends (0 = first failure ends it).
    locality: query assignment, "balanced" | "clustered" | "concentrated" (a degenerate control).
    updates: "additive" (x[u] += delta mod 8 after success) or "static" (no update).
    labels: operation identifiers, "random" or "reversed" (i -> N-1-i).
    """

    family: str = "chains"
    n_ops: int = 8
    depth: int = 4
    width: int = 4
    candidates: int = 4
    snapshot_period: int = 1
    hidden_resampling: bool = False
    error_allowance: int = 0
    locality: str = "balanced"
    updates: str = "additive"
    labels: str = "random"

    def __post_init__(self) -> None:
        _check_choice("family", self.family, FAMILIES)
        n = _check_int("n_ops", self.n_ops, 1, MAX_OPS, f"in 1..{MAX_OPS}")
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        allowed_depths = f"a divisor of n_ops={n}: {divisors}"
        depth = _check_int("depth", self.depth, -(2**63), None, allowed_depths)
        if depth < 1 or n % depth:
            raise ValueError(f"depth must be {allowed_depths}; got {depth}")
        _check_int("width", self.width, 1, REGISTER_SLOTS, f"in 1..{REGISTER_SLOTS}")
        _check_int("candidates", self.candidates, 2, REGISTER_VALUES, "in 2..8")
        _check_int("snapshot_period", self.snapshot_period, 0, None, "an integer >= 0")
        if not isinstance(self.hidden_resampling, bool | np.bool_):
            raise ValueError(
                f"hidden_resampling must be a bool (True | False); got {self.hidden_resampling!r}"
            )
        _check_int("error_allowance", self.error_allowance, 0, None, "an integer >= 0")
        _check_choice("locality", self.locality, LOCALITIES)
        _check_choice("updates", self.updates, UPDATES)
        _check_choice("labels", self.labels, LABELS)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> WorkflowSpec:
        """Build from keyword arguments, rejecting unknown names with the list of known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(
                f"unknown StatefulWorkflow parameter(s) {unknown}; allowed: {sorted(known)}"
            )
        return cls(**kwargs)

    def replace(self, **changes: Any) -> WorkflowSpec:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def layer_size(self) -> int:
        """k = N / depth: chains in the chains family, operations per layer in barriers."""
        return self.n_ops // self.depth

    def to_params(self) -> np.ndarray:
        """The int64 parameter vector the numba kernels read (indices P_*)."""
        params = np.zeros(N_PARAMS, dtype=np.int64)
        params[P_N] = self.n_ops
        params[P_DEPTH] = self.depth
        params[P_FAMILY] = FAMILIES.index(self.family)
        params[P_WIDTH] = self.width
        params[P_B] = self.candidates
        params[P_PERIOD] = self.snapshot_period
        params[P_HIDDEN] = int(self.hidden_resampling)
        params[P_R] = self.error_allowance
        params[P_LOCALITY] = LOCALITIES.index(self.locality)
        params[P_UPDATES] = UPDATES.index(self.updates)
        params[P_LABELS] = LABELS.index(self.labels)
        return params
