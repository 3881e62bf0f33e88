"""An independent, plain-Python model of StatefulWorkflow-v0 and its 19 reference controllers.

Why this exists: the project's own tests compare the numba kernels with themselves (the batched
runner and the per-step adapter call the same functions), so a bug shared by both paths passes.
This module re-derives everything from the written contract instead:

- the random streams from docs/DECISIONS.md and the docstrings of the rng module (SplitMix64
  counter streams, Lemire bounded draws with exact rejection, several bounds packed into one
  32-bit word as mixed-radix digits);
- the task generator from ../shared/docs/ARCHITECTURE.md and docs/DECISIONS.md;
- the transition rules from seed 003 as summarised in ARCHITECTURE.md;
- the controllers from docs/CONTROLLERS.md.

It is written for reading, not speed: lists, sets and ints, no numpy and no numba, and it
imports nothing from the project (envs, controllers, llm_policies, analysis), so that a test can
hold the real code against it trace for trace.

Where the documents leave a choice open, the choice made here is marked "Docs silent:" or
"Docs ambiguous:" in a comment, so a reader can tell a contract from a reading of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

# -- random streams ---------------------------------------------------------------------------

MASK64 = (1 << 64) - 1
TWO32 = 1 << 32
GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment
MIX1 = 0xBF58476D1CE4E5B9  # SplitMix64's finaliser multipliers
MIX2 = 0x94D049BB133111EB

TASK_STREAM, HIDDEN_STREAM, CONTROLLER_STREAM = 0, 1, 2
ONE_WORD_PERMUTATION = 12  # 12! < 2**32 <= 13!: up to 12 items, a permutation is one word


def mix64(value: int) -> int:
    """SplitMix64's finaliser, a bijection on 64-bit integers (Python ints, masked)."""
    z = value & MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int) -> int:
    """The 64-bit key of stream `stream` of task seed `seed`: a hash of the pair.

    Docs silent: DECISIONS.md says only "a hash of the pair"; this composition of mix64 is
    the one the rng module's code uses (the bits must agree, so it cannot be re-derived).
    """
    a = mix64(seed + GOLDEN)
    b = mix64(stream * GOLDEN + MIX1)
    return mix64(a ^ b)


def mixed_radix_digits(word: int, radices: list[int]) -> list[int]:
    """The digits of one Lemire draw over prod(radices), most significant first.

    word * r1 = d1 * 2**32 + rest1, rest1 * r2 = d2 * 2**32 + rest2, ...: the high halves are
    the digits of floor(word * prod / 2**32) in the mixed radix (r1, r2, ...), so one accepted
    word yields several exactly uniform bounded integers.
    """
    digits = []
    rest = word
    for radix in radices:
        product = rest * radix
        digits.append(product >> 32)
        rest = product % TWO32
    return digits


def insertion_order(positions: list[int]) -> list[int]:
    """Insert 1, 2, ... into [0], element c at positions[c - 1] (uniform on 0..c).

    Inserting larger elements never reorders smaller ones, which is why level b of the codes
    (the codes < b) is a prefix of the same draw.
    """
    sequence = [0]
    for element, position in enumerate(positions, start=1):
        sequence.insert(position, element)
    return sequence


class Stream:
    """One counter-based stream: word i is the high half of mix64(key + (i + 1) * GOLDEN)."""

    def __init__(self, seed: int, stream: int) -> None:
        self.key = stream_key(seed, stream)
        self.words = 0

    def word(self) -> int:
        """The next 32-bit word."""
        self.words += 1
        return mix64(self.key + self.words * GOLDEN) >> 32

    def accepted_word(self, product: int) -> int:
        """The next word that passes Lemire's exact test for bound `product` (<= 2**32).

        Lemire: with m = word * product, reject while m mod 2**32 < 2**32 mod product; the
        survivors make floor(m / 2**32) exactly uniform on 0..product-1.
        """
        threshold = TWO32 % product
        while True:
            word = self.word()
            if (word * product) % TWO32 >= threshold:
                return word

    def digits(self, radices: list[int]) -> list[int]:
        """Uniform digits for the given bounds, greedily packed: as many consecutive bounds
        as keep the product <= 2**32 share one accepted word.

        Docs silent: "several bounds packed per 32-bit word" does not say how they are
        grouped; greedy grouping, most significant digit first, is the rng code's rule.
        """
        out: list[int] = []
        i = 0
        while i < len(radices):
            product, j = 1, i
            while j < len(radices) and product * radices[j] <= TWO32:
                product *= radices[j]
                j += 1
            out += mixed_radix_digits(self.accepted_word(product), radices[i:j])
            i = j
        return out

    def uniforms(self, count: int, bound: int) -> list[int]:
        """`count` draws uniform on 0..bound-1."""
        return self.digits([bound] * count)

    def below(self, bound: int) -> int:
        """One draw uniform on 0..bound-1 from one accepted word (the controllers' draw)."""
        return (self.accepted_word(bound) * bound) >> 32

    def permutation(self, n: int) -> list[int]:
        """A uniform permutation of 0..n-1.

        n <= 12: one word accepted over n! and random insertion (always one word, even for
        n = 1). Larger n: Fisher-Yates from the top (position n-1-t swaps with a draw on
        0..n-1-t), its bounds n, n-1, ..., 2 packed greedily into words. Docs silent: the
        direction of the Fisher-Yates pass, taken from the rng code.
        """
        if n <= ONE_WORD_PERMUTATION:
            word = self.accepted_word(math.factorial(n))
            return insertion_order(mixed_radix_digits(word, list(range(2, n + 1))))
        sequence = list(range(n))
        for t, j in enumerate(self.digits([n - t for t in range(n - 1)])):
            i = n - 1 - t
            sequence[i], sequence[j] = sequence[j], sequence[i]
        return sequence

    def codes_below(self, b: int) -> list[int]:
        """The order of codes 0..b-1 inside one uniform permutation of the 8 codes.

        The word is accepted over 8! whatever b is, so all levels of b see one draw.
        """
        word = self.accepted_word(math.factorial(8))
        return insertion_order(mixed_radix_digits(word, list(range(2, b + 1))))


# -- the task family --------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """The public rules of a task family; field names are the env's gym.make kwargs."""

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

    def kwargs(self) -> dict[str, Any]:
        """The spec as gym.make keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Task:
    """One episode's task, indexed by operation identifier (as actions and the public task).

    prereq[v] is the set of identifiers that must be completed before v; codes[v][a] is the
    code of candidate slot a.
    """

    seed: int
    initial: list[int]
    prereq: list[set[int]]
    query: list[int]
    update: list[int]
    delta: list[int]
    codes: list[list[int]]


def smallest_label_schedule(prereq: list[set[int]]) -> list[int]:
    """The order in which operations run if every call succeeds and each decision takes the
    smallest-labelled ready operation."""
    done: set[int] = set()
    order = []
    for _ in range(len(prereq)):
        v = min(v for v in range(len(prereq)) if v not in done and prereq[v] <= done)
        order.append(v)
        done.add(v)
    return order


def generate_task(spec: Spec, seed: int) -> Task:
    """The task of `seed`, drawn from the task stream in the documented order.

    Order (ARCHITECTURE.md, DECISIONS.md): 8 initial values in Z_8; a permutation giving each
    graph node its identifier; a permutation of 0..N-1 taken mod w as node queries; update
    registers in 0..7 taken mod w; increments in 1..7; one 8-code permutation per node seen
    through "codes < b". Every draw is made whatever the levels, which pairs tasks by seed.
    """
    n, depth, w, b = spec.n_ops, spec.depth, spec.width, spec.candidates
    k = n // depth
    stream = Stream(seed, TASK_STREAM)
    initial = stream.uniforms(8, 8)
    label = stream.permutation(n)  # label[node] = identifier
    if spec.labels == "reversed":
        label = [n - 1 - i for i in label]
    query, update, delta = [0] * n, [0] * n, [0] * n
    for node, value in enumerate(stream.permutation(n)):
        query[label[node]] = value % w
    for node, value in enumerate(stream.uniforms(n, 8)):
        update[label[node]] = value % w
    for node, value in enumerate(stream.uniforms(n, 7)):
        delta[label[node]] = 0 if spec.updates == "static" else value + 1
    codes: list[list[int]] = [[] for _ in range(n)]
    for node in range(n):
        codes[label[node]] = stream.codes_below(b)

    prereq: list[set[int]] = [set() for _ in range(n)]
    if spec.family == "chains":  # k chains of `depth` nodes: node c*d + j after c*d + j - 1
        for c in range(k):
            for j in range(1, depth):
                prereq[label[c * depth + j]].add(label[c * depth + j - 1])
    else:  # `depth` layers of k nodes: node layer*k + j after every node of layer - 1
        for layer in range(1, depth):
            for j in range(k):
                prereq[label[layer * k + j]] |= {label[(layer - 1) * k + i] for i in range(k)}

    if spec.locality == "concentrated":
        query = [0] * n
    elif spec.locality == "clustered":
        # Same multiplicities as balanced, in blocks along the smallest-label schedule.
        # Docs silent: the order of the blocks; register 0's block first is assumed here.
        counts = [query.count(r) for r in range(8)]
        registers = [r for r in range(8) for _ in range(counts[r])]
        for v, r in zip(smallest_label_schedule(prereq), registers, strict=True):
            query[v] = r
    return Task(seed, initial, prereq, query, update, delta, codes)


# -- the environment ---------------------------------------------------------------------------

# The integer `failure` of an observation indexes this tuple. Docs silent on the encoding;
# ARCHITECTURE.md lists the categories in this order.
FAILURE_NAMES: tuple[str | None, ...] = (None, "dependency", "candidate", "completed")


class PlainWorkflowEnv:
    """StatefulWorkflow's rules (seed 003 via ARCHITECTURE.md), one step at a time.

    Returns the same observation and info keys as the real env, as plain lists and ints, so a
    test can compare them field by field.
    """

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.task: Task | None = None

    def reset(self, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        spec = self.spec
        self.task = generate_task(spec, seed)
        self.x = list(self.task.initial)
        self.done: set[int] = set()
        self.successes = self.calls = self.errors = 0
        self.failure: str | None = None
        self.ended = False
        self.visible = True  # the initial observation shows every register
        self.resampled = False
        self.last_update = [-1, -1]
        self.hidden = Stream(seed, HIDDEN_STREAM)
        return self.observation(), self.info()

    def step(self, action: tuple[int, int]) -> tuple[dict[str, Any], float, bool, bool,
                                                     dict[str, Any]]:
        spec, task = self.spec, self.task
        assert task is not None, "reset() first"
        op, slot = (int(a) for a in action)
        if not (0 <= op < spec.n_ops and 0 <= slot < spec.candidates):
            raise ValueError(f"action {action!r} outside (N, b) = ({spec.n_ops}, "
                             f"{spec.candidates})")
        if self.ended:
            raise RuntimeError("the episode has ended")
        self.calls += 1
        self.resampled = False
        if op in self.done:
            self.failure = "completed"
        elif not task.prereq[op] <= self.done:
            self.failure = "dependency"
        elif task.codes[op][slot] != self.x[task.query[op]] % spec.candidates:
            self.failure = "candidate"  # x is read before op's own update
        else:
            self.failure = None
        if self.failure is not None:  # a failed call changes no state, visibility included
            self.errors += 1
            self.ended = self.errors > spec.error_allowance
            return self.observation(), 0.0, self.ended, False, self.info()

        self.done.add(op)
        u = task.update[op]
        self.x[u] = (self.x[u] + task.delta[op]) % 8
        self.successes += 1
        if spec.hidden_resampling:
            fresh = self.hidden.uniforms(8, 8)  # only successes advance the hidden stream
            self.x[:spec.width] = fresh[:spec.width]
            self.resampled = True
        period = spec.snapshot_period
        self.visible = period > 0 and self.successes % period == 0
        self.last_update = [u, task.delta[op]]
        self.ended = self.successes == spec.n_ops
        return self.observation(), 1.0 / spec.n_ops, self.ended, False, self.info()

    def ready(self) -> list[int]:
        """1 for operations that are not done and whose prerequisites are all done."""
        assert self.task is not None
        return [int(v not in self.done and self.task.prereq[v] <= self.done)
                for v in range(self.spec.n_ops)]

    def observation(self) -> dict[str, Any]:
        spec, task = self.spec, self.task
        assert task is not None
        n = spec.n_ops
        return {
            "registers": list(self.x) if self.visible else [-1] * 8,
            "completed": [int(v in self.done) for v in range(n)],
            "last_update": list(self.last_update),
            "failure": FAILURE_NAMES.index(self.failure),
            "errors": self.errors,
            "prereq": [int(u in task.prereq[v]) for v in range(n) for u in range(n)],
            "query_register": list(task.query),
            "update_register": list(task.update),
            "delta": list(task.delta),
            "codes": [c for row in task.codes for c in row],
        }

    def info(self) -> dict[str, Any]:
        assert self.task is not None
        return {
            "failure": FAILURE_NAMES.index(self.failure),  # a code, as the observation's
            "success": self.successes == self.spec.n_ops,
            "completed_ops": self.successes,
            "calls": self.calls,
            "errors": self.errors,
            "registers_visible": self.visible,
            "resampled": self.resampled,
            # Legality from public information: ready operations, then every candidate slot.
            "action_mask": [bool(r) for r in self.ready()] + [True] * self.spec.candidates,
            "task_seed": self.task.seed,
        }


# -- the reference controllers (docs/CONTROLLERS.md) -------------------------------------------


@dataclass(frozen=True)
class Traits:
    """One row of CONTROLLERS.md's table.

    retention: "all" (every active register, raw), "cache" (the `capacity` lowest-index
        active registers), "none", "stale" (all, from observations only), "next-use"
        (`capacity` residues chosen by next use), "residue" (all, mod b), "plan".
    selection: "scan" (serial scan, limit `scan`), "guess", "plan", "indexed", "sham"
        (checks min(4, b), uses slot 0's result), "fixed" (checks min(4, b), uses them all).

    The failure modes (CONTROLLERS.md, "Failure modes (diagnosis only)"), 0 for the 19:
    probabilities in parts of 10,000 that a call after a failed one repeats it
    (`perseverate`), that a decision runs a not-ready operation (`schedule_lapse`), that a
    success's update is applied one decision late (`update_delay`) or never (`update_miss`);
    `offset`: the slot taken is the one whose code is that much above the chosen slot's.
    """

    retention: str
    selection: str
    capacity: int = 8
    scan: int = 8  # 8 >= every b: unlimited
    eliminate: bool = False
    random_schedule: bool = False
    perseverate: int = 0
    schedule_lapse: int = 0
    update_delay: int = 0
    update_miss: int = 0
    offset: int = 0


CONTROLLERS: dict[str, Traits] = {
    "exact": Traits("all", "scan"),
    "cache-2": Traits("cache", "scan", capacity=2),
    "cache-4": Traits("cache", "scan", capacity=4),
    "scan-1": Traits("all", "scan", scan=1),
    "scan-2": Traits("all", "scan", scan=2),
    "scan-4": Traits("all", "scan", scan=4),
    "cache-2+scan-4": Traits("cache", "scan", capacity=2, scan=4),
    "random-schedule": Traits("all", "scan", random_schedule=True),
    "uniform-candidate": Traits("none", "guess"),
    "next-use-2": Traits("next-use", "scan", capacity=2),
    "residue-8": Traits("residue", "scan"),
    "precomputed-plan": Traits("plan", "plan"),
    "stale-8": Traits("stale", "scan"),
    "indexed": Traits("all", "indexed"),
    "sham-check-4": Traits("all", "sham", scan=4),
    "fixed-check-4": Traits("all", "fixed", scan=4),
    "eliminate": Traits("none", "guess", eliminate=True),
    "cache-2+eliminate": Traits("cache", "scan", capacity=2, eliminate=True),
    "scan-1+eliminate": Traits("all", "scan", scan=1, eliminate=True),
}
CONTROLLER_NAMES = tuple(CONTROLLERS)
NEVER = math.inf
SCALE = 10_000  # probabilities of the failure modes are in parts of SCALE


class PlainController:
    """A reference controller that reads only the public task, the rules and observations.

    Call `begin` with the episode's first observation and task seed, then `act` with every
    observation (the failure of the previous call is in it); `counters` gives the resources.

    Readings of the contract where it is loose:
    - every pick is a bounded draw, a pick among one item included (it consumes a word);
    - checks and lookups are charged only when a value is known: with an unknown value every
      controller guesses (shared rule "Guess ... (no checks)"), even sham/fixed-check-4
      ("min(4, b) checks per decision") and indexed ("one lookup ... per decision");
    - a visible snapshot (re)loads the registers the retention column names, not only those
      retained at the time ("overwrites every retained register" would reload nothing after
      hidden resampling made the controller forget);
    - cache_entries is read at each decision, after feedback and snapshot are absorbed.
    """

    def __init__(self, name: str, spec: Spec, traits: Traits | None = None) -> None:
        self.name = name
        self.traits = CONTROLLERS[name] if traits is None else traits
        self.spec = spec

    # -- episode start -------------------------------------------------------------------------
    def begin(self, observation: dict[str, Any], task_seed: int) -> None:
        spec, traits = self.spec, self.traits
        n, b = spec.n_ops, spec.candidates
        flat_codes = list(observation["codes"])
        flat_prereq = list(observation["prereq"])
        self.query = list(observation["query_register"])
        self.update = list(observation["update_register"])
        self.delta = list(observation["delta"])
        self.codes = [flat_codes[v * b:(v + 1) * b] for v in range(n)]
        self.prereq = [{u for u in range(n) if flat_prereq[v * n + u]} for v in range(n)]
        self.schedule = smallest_label_schedule(self.prereq)
        self.stream = Stream(task_seed, CONTROLLER_STREAM)
        self.belief: dict[int, int] = {}  # register -> value (or residue mod b)
        self.last: tuple[int, int, bool] | None = None  # (operation, slot, was a guess)
        self.position = 0  # successes so far: the position along the schedule
        self.eliminated: dict[int, set[int]] = {}
        self.pending: tuple[int, int] | None = None  # an update delayed by one decision
        self.checks = self.lookups = self.prep = self.entries = 0
        self.table: dict[int, Any] = {}
        if traits.selection == "indexed":
            self.table = {v: {code: a for a, code in enumerate(self.codes[v])} for v in range(n)}
            self.prep = n * b
        elif traits.selection == "plan":
            # Simulate the schedule from the (fully shown) initial state with public updates.
            x = list(observation["registers"])
            for v in self.schedule:
                self.table[v] = self.codes[v].index(x[self.query[v]] % b)
                x[self.update[v]] = (x[self.update[v]] + self.delta[v]) % 8
            self.prep = n * b

    # -- helpers ---------------------------------------------------------------------------------
    def next_use(self, register: int, after: int) -> float:
        """First schedule position > after whose operation queries `register` (or NEVER)."""
        for p in range(after + 1, self.spec.n_ops):
            if self.query[self.schedule[p]] == register:
                return p
        return NEVER

    def residues(self) -> bool:
        return self.traits.retention in ("next-use", "residue")

    def chance(self, units: int) -> bool:
        """True with probability units / SCALE: one word, none when it is 0 or 1."""
        if units <= 0:
            return False
        if units >= SCALE:
            return True
        return self.stream.below(SCALE) < units

    def apply_update(self, register: int, delta: int) -> None:
        if register in self.belief and self.traits.retention != "stale":
            modulus = self.spec.candidates if self.residues() else 8
            self.belief[register] = (self.belief[register] + delta) % modulus

    def draw(self, items: list[int]) -> int:
        """Uniform choice of one item (in increasing order) from the controller stream."""
        if not items:
            raise RuntimeError("nothing to choose from: unreachable under the contract")
        return items[self.stream.below(len(items))]

    # -- feedback ----------------------------------------------------------------------------
    def absorb_feedback(self, failure: int) -> None:
        """What the previous call teaches: an eliminated slot, or a success's public update."""
        assert self.last is not None
        v, slot, guessed = self.last
        if failure != 0:
            if FAILURE_NAMES[failure] == "candidate" and self.traits.eliminate:
                self.eliminated.setdefault(v, set()).add(slot)
            return
        t = self.position
        self.position += 1
        if self.spec.hidden_resampling:  # the feedback announces resampling: forget it all
            self.belief.clear()
            self.pending = None
            return
        retention = self.traits.retention
        if retention == "next-use" and guessed:
            # The chosen slot's code is the queried residue: insert it before v's update.
            self.belief[self.query[v]] = self.codes[v][slot]
        if self.chance(self.traits.update_miss):
            pass  # never applied
        elif self.chance(self.traits.update_delay):
            self.pending = (self.update[v], self.delta[v])
        else:
            self.apply_update(self.update[v], self.delta[v])
        if retention == "next-use":
            while len(self.belief) > self.traits.capacity:
                # Furthest next use after t goes first; ties: the higher register index.
                worst = max(self.belief, key=lambda r: (self.next_use(r, t), r))
                del self.belief[worst]

    def absorb_snapshot(self, registers: list[int]) -> None:
        """A visible observation overwrites (or refills) what the controller retains."""
        w, b = self.spec.width, self.spec.candidates
        retention = self.traits.retention
        self.pending = None  # the snapshot shows the updated values
        if retention in ("all", "stale"):
            self.belief = {r: registers[r] for r in range(w)}
        elif retention == "residue":
            self.belief = {r: registers[r] % b for r in range(w)}
        elif retention == "cache":
            self.belief = {r: registers[r] for r in range(min(self.traits.capacity, w))}
        elif retention == "next-use":
            # Docs ambiguous: "the (at most 2) active registers with the earliest next use".
            # Read as: among registers that are used again (a register never used again has
            # no next use to rank by), so the refill may hold fewer than 2. The other reading
            # (fill up with never-used registers) differs from the real code in cache_entries.
            used_again = [r for r in range(w) if self.next_use(r, self.position) != NEVER]
            by_use = sorted(used_again, key=lambda r: self.next_use(r, self.position))
            self.belief = {r: registers[r] % b for r in by_use[:self.traits.capacity]}

    # -- decision ------------------------------------------------------------------------------
    def choose_operation(self, completed: list[int]) -> int:
        done = {v for v, flag in enumerate(completed) if flag}
        n = self.spec.n_ops
        if self.traits.random_schedule:  # uniform among incomplete, ignoring prerequisites
            op = self.draw([v for v in range(n) if v not in done])
        else:
            op = min(v for v in range(n) if v not in done and self.prereq[v] <= done)
        blocked = [v for v in range(n) if v not in done and not self.prereq[v] <= done]
        if self.traits.schedule_lapse and blocked and self.chance(self.traits.schedule_lapse):
            op = self.draw(blocked)
        return op

    def act(self, observation: dict[str, Any]) -> tuple[int, int]:
        traits, b = self.traits, self.spec.candidates
        failure = int(observation["failure"])
        if self.last is not None:
            if self.pending is not None:
                register, delta = self.pending
                self.pending = None
                self.apply_update(register, delta)
            self.absorb_feedback(failure)
        registers = list(observation["registers"])
        visible = min(registers) >= 0
        if visible:
            self.absorb_snapshot(registers)
        self.entries = max(self.entries, len(self.belief))
        if self.last is not None and failure != 0 and self.chance(traits.perseverate):
            return self.last[0], self.last[1]

        op = self.choose_operation(list(observation["completed"]))
        q = self.query[op]
        value: int | None = None
        if traits.retention not in ("none", "plan"):
            value = registers[q] if visible else self.belief.get(q)
        excluded = self.eliminated.get(op, set()) if traits.eliminate else set()

        guessed = False
        if traits.selection == "plan":
            slot = self.table[op]
            self.lookups += 1
        elif traits.selection == "guess" or value is None:
            slot = self.draw([a for a in range(b) if a not in excluded])
            guessed = True
        elif traits.selection == "indexed":
            slot = self.table[op][value % b]
            self.lookups += 1
        else:
            slot, guessed = self.select_by_checks(op, value % b, excluded)
        if traits.offset:
            slot = self.codes[op].index((self.codes[op][slot] + traits.offset) % b)
        self.last = (op, slot, guessed)
        return op, slot

    def select_by_checks(self, op: int, target: int, excluded: set[int]) -> tuple[int, bool]:
        """Serial scan (or the sham / fixed variants); no match: guess among the unexamined."""
        b, traits = self.spec.candidates, self.traits
        limit = min(traits.scan, b)
        if traits.selection == "scan":
            examined = 0
            for a in range(limit):
                examined += 1
                self.checks += 1
                if self.codes[op][a] == target:
                    return a, False
        else:
            self.checks += limit  # min(4, b) checks are charged every decision
            examined = 1 if traits.selection == "sham" else limit
            for a in range(examined):
                if self.codes[op][a] == target:
                    return a, False
        return self.draw([a for a in range(examined, b) if a not in excluded]), True

    def counters(self) -> dict[str, int]:
        """The episode's resources (CONTROLLERS.md, "Resource counters")."""
        bits = math.ceil(math.log2(self.spec.candidates)) if self.residues() else 3
        return {
            "checks": self.checks,
            "lookups": self.lookups,
            "prep_entries": self.prep,
            "cache_entries": self.entries,
            "value_bits": self.entries * bits,
            "plan_slots": self.spec.n_ops if self.traits.retention == "plan" else 0,
        }
