"""The parameters of a StatefulWorkflow task family, validated once, in one place.

Every knob of seed 003's primary and follow-on studies is a field here, so an env, a vector
env, a grid row and a command-line flag all mean the same thing by the same name. A bad value
fails at construction with a ValueError that names the parameter and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from diagym.envs._core.checks import check_bool, check_choice, check_int
from diagym.envs._core.params import EnvParams

# Each categorical knob's levels, in code order: the spec encodes a level as its index here,
# and the generator compares with the named codes below, so the two cannot drift apart.
GRAPH_SHAPES = ("chains", "barriers")
LOCALITIES = ("balanced", "clustered", "concentrated")
UPDATES = ("additive", "static")
LABELS = ("random", "reversed")
CHAINS, BARRIERS = (GRAPH_SHAPES.index(level) for level in ("chains", "barriers"))
BALANCED, CLUSTERED, CONCENTRATED = (
    LOCALITIES.index(level) for level in ("balanced", "clustered", "concentrated")
)
ADDITIVE, STATIC = (UPDATES.index(level) for level in ("additive", "static"))
RANDOM_LABELS, REVERSED = (LABELS.index(level) for level in ("random", "reversed"))

MAX_OPS = 32
REGISTER_SLOTS = 8
REGISTER_VALUES = 8
# The kernels keep calls, errors and the next snapshot in int64, the errors field is
# Discrete(R + 2) and the batched runner sizes its columns from (N + R) * b: 2**31 keeps all of
# that far inside int64 (values near 2**63 overflowed). A period beyond N already means
# "initial only", and no run makes 2**31 failed calls.
MAX_SNAPSHOT_PERIOD = 2**31
MAX_ERROR_ALLOWANCE = 2**31

# Positions in the int64 parameter vector handed to the numba kernels.
P_N, P_DEPTH, P_FAMILY, P_WIDTH, P_B, P_PERIOD, P_HIDDEN, P_R, P_LOCALITY, P_UPDATES, P_LABELS = (
    range(11)
)
N_PARAMS = 11


@dataclass(frozen=True)
class WorkflowParams(EnvParams):
    """One level of every factor of the workflow task family (seed 003, sections 3 and 7).

    family: "chains" (N/depth disjoint chains) or "barriers" (depth layers, each depending on
        all of the previous layer).
    n_ops: N, the number of operations, 1..32 (the paper uses 4, 8, 16).
    depth: longest prerequisite chain in nodes; must divide n_ops.
    width: active registers w, 1..8.
    candidates: b, candidate slots per operation, 2..8.
    snapshot_period: h in 0..2**31; 0 shows registers only initially (the paper's "history"), 1
        after every success ("snapshot"), h > 1 after every h-th success.
    hidden_resampling: after each success, active registers are redrawn, unseen until a snapshot.
    error_allowance: R in 0..2**31; failed calls tolerated before the episode ends (0 = the first
        failure ends it).
    locality: query assignment, "balanced" | "clustered" | "concentrated" (a degenerate control).
    updates: "additive" (x[u] += delta mod 8 after success) or "static" (no update).
    labels: operation identifiers, "random" or "reversed" (i -> N-1-i).
    """

    TITLE: ClassVar[str] = "StatefulWorkflow"

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
        # Normalised in place (numpy integers and bools to Python's), as a frozen dataclass
        # allows only through object.__setattr__, so equal settings compare equal and the
        # spaces built from them take plain ints.
        family = check_choice("family", self.family, GRAPH_SHAPES)
        n = check_int("n_ops", self.n_ops, 1, MAX_OPS, f"in 1..{MAX_OPS}")
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        allowed_depths = f"a divisor of n_ops={n}: {divisors}"
        depth = check_int("depth", self.depth, -(2**63), None, allowed_depths)
        if depth < 1 or n % depth:
            raise ValueError(f"depth must be {allowed_depths}; got {depth}")
        normal = {
            "family": family,
            "n_ops": n,
            "depth": depth,
            "width": check_int("width", self.width, 1, REGISTER_SLOTS, f"in 1..{REGISTER_SLOTS}"),
            "candidates": check_int("candidates", self.candidates, 2, REGISTER_VALUES,
                                    f"in 2..{REGISTER_VALUES}"),
            "snapshot_period": check_int("snapshot_period", self.snapshot_period, 0,
                                         MAX_SNAPSHOT_PERIOD, "an integer in 0..2**31"),
            "hidden_resampling": check_bool("hidden_resampling", self.hidden_resampling),
            "error_allowance": check_int("error_allowance", self.error_allowance, 0,
                                         MAX_ERROR_ALLOWANCE, "an integer in 0..2**31"),
            "locality": check_choice("locality", self.locality, LOCALITIES),
            "updates": check_choice("updates", self.updates, UPDATES),
            "labels": check_choice("labels", self.labels, LABELS),
        }
        self._store(normal)


    def episode_decisions(self) -> tuple[int, int]:
        """(calls of an episode in which no call fails, most calls an episode can take): N
        successes end it, and so does the (R + 1)-th failure, so it takes at most N + R."""
        return self.n_ops, self.n_ops + self.error_allowance

    @property
    def layer_size(self) -> int:
        """k = N / depth: chains in the chains family, operations per layer in barriers."""
        return self.n_ops // self.depth

    def to_params(self) -> np.ndarray:
        """The int64 parameter vector the numba kernels read (indices P_*)."""
        params = np.zeros(N_PARAMS, dtype=np.int64)
        params[P_N] = self.n_ops
        params[P_DEPTH] = self.depth
        params[P_FAMILY] = GRAPH_SHAPES.index(self.family)
        params[P_WIDTH] = self.width
        params[P_B] = self.candidates
        params[P_PERIOD] = self.snapshot_period
        params[P_HIDDEN] = int(self.hidden_resampling)
        params[P_R] = self.error_allowance
        params[P_LOCALITY] = LOCALITIES.index(self.locality)
        params[P_UPDATES] = UPDATES.index(self.updates)
        params[P_LABELS] = LABELS.index(self.labels)
        return params


def __getattr__(name: str) -> Any:
    """`WorkflowSpec`, the old name docs/API.md promised, as a deprecated alias of
    WorkflowParams (named like DacsParams: one pattern for every family's params)."""
    if name == "WorkflowSpec":
        import warnings

        warnings.warn("diagym.envs.workflow.params.WorkflowSpec is deprecated; use WorkflowParams",
                      DeprecationWarning, stacklevel=2)
        return WorkflowParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
