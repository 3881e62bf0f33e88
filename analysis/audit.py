"""The exact structural audit of seed 003's prerequisite graphs (paper Table 1, appendix B.1).

Depth is the paper's difficulty knob, but depth alone does not say how constrained a task is:
the number of prerequisite edges, of reachable completion states, of successful operation
orders and of operations ready at a typical state all move with it, and differently in the
two graph families. This module measures those four quantities exactly, from the
prerequisite matrix of a real env episode, so Table 1 is a statement about the code that runs
rather than about the generator as described. `closed_forms` gives appendix B.1's formulas so
the enumeration and the algebra check each other.

Method: a completion set ("mask") is reachable from the empty set by adding ready operations
exactly when it is closed under prerequisites (add its members in a topological order), so
the reachable masks are the down-sets of the graph. They are enumerated level by level
(level = number of completed operations) as int64 bitmasks with numpy, carrying the number
of orders reaching each mask; that count at the full mask is the number of successful
permutations, found without enumerating permutations. A graph that falls apart into
weakly connected components is audited per component and recombined exactly (down-sets of
a disjoint union are products, orders interleave multinomially), which keeps the chains
family and the free graph (depth 1) cheap up to the env's limit of 32 operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gymnasium as gym
import numpy as np

import diagym  # noqa: F401  (registers StatefulWorkflow-v0 with Gymnasium)
from diagym.envs.workflow.params import WorkflowParams

ENV_ID = "StatefulWorkflow-v0"
TABLE_FAMILIES = ("chains", "barriers")  # Table 1's row order

# Enumeration refuses (ValueError) rather than exhausting memory past this many masks in one
# connected component; the free graph on 20 operations, 2**20 masks, still fits.
DEFAULT_MAX_MASKS = 1 << 21

# N! < 2**63 for N <= 20, so order counts of components this small fit in int64; larger
# components count in Python ints (numpy object arrays), slower but exact.
_INT64_SAFE_OPS = 20


@dataclass(frozen=True)
class _ComponentCounts:
    """Exact counts for one connected piece; ready_sum is summed over all of its masks."""

    size: int
    masks: int
    orders: int
    ready_sum: int


def _pred_bits(prereq: np.ndarray) -> list[int]:
    """pred[v] = bitmask of the operations v depends on (row v of the matrix)."""
    return [sum(1 << int(u) for u in np.flatnonzero(row)) for row in prereq]


def _components(prereq: np.ndarray) -> list[list[int]]:
    """Weakly connected components, each sorted, in order of smallest member."""
    n = prereq.shape[0]
    adjacent = prereq | prereq.T
    seen = np.zeros(n, dtype=bool)
    components: list[list[int]] = []
    for start in range(n):
        if seen[start]:
            continue
        seen[start] = True
        stack, members = [start], []
        while stack:
            v = stack.pop()
            members.append(v)
            for u in np.flatnonzero(adjacent[v] & ~seen):
                seen[u] = True
                stack.append(int(u))
        components.append(sorted(members))
    return components


def _enumerate(prereq: np.ndarray, max_masks: int) -> _ComponentCounts:
    """Level-by-level bitmask DP over the reachable masks of one graph.

    Level t holds the distinct reachable masks with t completed operations and, for each,
    the number of orders reaching it. Expanding a level by every ready operation and merging
    duplicates (sort + reduceat) gives level t + 1; the ready operations counted on the way
    are the ready-node statistic.
    """
    n = prereq.shape[0]
    pred = _pred_bits(prereq)
    count_dtype: Any = np.int64 if n <= _INT64_SAFE_OPS else object
    level = np.zeros(1, dtype=np.int64)
    counts = np.ones(1, dtype=count_dtype)
    masks, ready_sum = 1, 0
    for t in range(n):
        ready = [
            ((level & (1 << v)) == 0) & ((level & pred[v]) == pred[v]) for v in range(n)
        ]
        n_candidates = int(sum(int(r.sum()) for r in ready))
        if n_candidates == 0:
            raise ValueError(
                f"prereq has a cycle: no operation is ready after {t} of {n} completions"
            )
        # Each mask of the next level is reached from at most t + 1 masks of this one.
        if masks + -(-n_candidates // (t + 1)) > max_masks:
            raise ValueError(
                f"more than max_masks={max_masks} reachable completion sets in a connected "
                f"graph of {n} operations; too many to enumerate exactly"
            )
        ready_sum += n_candidates
        cand_masks = np.concatenate([level[r] | (1 << v) for v, r in enumerate(ready)])
        cand_counts = np.concatenate([counts[r] for r in ready])
        order = np.argsort(cand_masks, kind="stable")
        sorted_masks = cand_masks[order]
        starts = np.flatnonzero(np.r_[True, sorted_masks[1:] != sorted_masks[:-1]])
        level = sorted_masks[starts]
        counts = np.add.reduceat(cand_counts[order], starts)
        masks += len(level)
    # A DAG's only mask with n completions is the full one.
    return _ComponentCounts(size=n, masks=masks, orders=int(counts[0]), ready_sum=ready_sum)


def audit_graph(
    prereq: np.ndarray, *, decompose: bool = True, max_masks: int = DEFAULT_MAX_MASKS
) -> dict[str, Any]:
    """Edges, reachable masks, valid orders and mean ready nodes of a prerequisite matrix.

    prereq[v, u] True means u must precede v. ready_nodes averages the number of incomplete
    operations whose prerequisites are all complete uniformly over the reachable masks other
    than the full one (the states where a choice is still to be made). decompose=False
    enumerates the whole graph in one piece, which tests use to cross-check the
    recombination. Raises ValueError for a non-square matrix, an empty graph or a cycle.
    """
    prereq = np.asarray(prereq)
    if prereq.ndim != 2 or prereq.shape[0] != prereq.shape[1]:
        raise ValueError(f"prereq must be a square N x N matrix; got shape {prereq.shape}")
    n = prereq.shape[0]
    if n < 1:
        raise ValueError("prereq must have at least one operation")
    prereq = prereq.astype(bool)
    groups = _components(prereq) if decompose else [list(range(n))]
    parts = [_enumerate(prereq[np.ix_(g, g)], max_masks) for g in groups]

    masks = math.prod(p.masks for p in parts)
    # Orders of a disjoint union: interleave the pieces' orders (a multinomial coefficient).
    interleavings = math.factorial(n) // math.prod(math.factorial(p.size) for p in parts)
    orders = interleavings * math.prod(p.orders for p in parts)
    # A mask of the union is a tuple of piece masks; its ready count is the sum of theirs.
    ready_sum = sum(p.ready_sum * (masks // p.masks) for p in parts)
    return {
        "edges": int(prereq.sum()),
        "masks": masks,
        "orders": orders,
        "ready_nodes": float(Fraction(ready_sum, masks - 1)) if masks > 1 else 0.0,
    }


def audit(family: str, n_ops: int, depth: int) -> dict[str, Any]:
    """Audit the prerequisite graph the real env generates for seed 0 of this family.

    The graph goes through gymnasium.make and reset, so a generator bug shows up here as a
    mismatch with `closed_forms` rather than being assumed away.
    """
    env = gym.make(ENV_ID, family=family, n_ops=n_ops, depth=depth)
    try:
        env.reset(seed=0)
        prereq = np.array(env.unwrapped.task.prereq, dtype=bool)  # type: ignore[attr-defined]
    finally:
        env.close()
    return {"family": family, "depth": int(depth), **audit_graph(prereq)}


def closed_forms(family: str, n_ops: int, depth: int) -> dict[str, Any]:
    """Appendix B.1's closed forms for edges, masks and orders (ready nodes has none).

    With k = N / d, chains are k disjoint d-chains: each chain is done to one of d + 1
    lengths and the orders interleave k fixed sequences. Barriers are d layers of k, each
    layer after all of the previous one: a mask is some completed layers plus a non-empty
    proper part of the next (or everything), and each layer is done in any of k! orders.
    """
    spec = WorkflowParams(family=family, n_ops=n_ops, depth=depth)
    n, d, k = spec.n_ops, spec.depth, spec.layer_size
    if spec.family == "chains":
        edges, masks = k * (d - 1), (d + 1) ** k
        orders = math.factorial(n) // math.factorial(d) ** k
    else:
        edges, masks = (d - 1) * k * k, d * (2**k - 1) + 1
        orders = math.factorial(k) ** d
    return {"family": spec.family, "depth": d, "edges": edges, "masks": masks, "orders": orders}


def divisors(n: int) -> list[int]:
    """The depths a task of n operations admits, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def audit_table(n_ops: int) -> list[dict[str, Any]]:
    """Table 1 for n_ops: every divisor depth, chains rows then barriers rows."""
    WorkflowParams(n_ops=n_ops, depth=1)  # a bad n_ops fails here, naming the parameter
    return [audit(family, n_ops, d) for family in TABLE_FAMILIES for d in divisors(n_ops)]
