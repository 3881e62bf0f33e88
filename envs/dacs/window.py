"""The orchestrator's context window for one DACS steering request, counted exactly.

Seed 002's claim is about what sits in the window when a request is answered, so the window
is the environment's central object: which agents appear as full blocks and which as
registry entries (`context_mode`), where the requester's block sits (`order`), and what a
token budget W removes. A focus window (dacs mode, or a focus action) follows seed 002: the
focused agent's full context is never cut; the other agents' registry entries are compressed,
then dropped, by a documented priority (fit_focus). Flat and registry windows are cut by
prefix truncation (the request is always kept, the agent blocks keep their first
W - request tokens). The numeric observation (which facts are fully visible) is
derived from the same token layout, so text and numbers never disagree.

Exact counting without re-encoding the whole window: every line ends with "\\n" and starts
with a non-space character, and no cl100k_base pre-token spans a newline followed by a
non-space character, so BPE never merges across a line boundary and the window's token count
is the sum of its lines' counts. Each block's ids are encoded once and checked against the
block's own encoding; only the line a cut falls in is re-encoded (decode the cut ids, close
the line with "\\n" so the request header stays at a line start, re-encode, and step back one
token at a time until the total fits W). A cut line's fact or decision is not visible.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from diagym.envs._core import tokens
from diagym.envs.dacs.params import CONTEXT_MODES, ORDERS  # noqa: F401  (the window's knob levels)
from diagym.envs.dacs.scenario import KEYS, VALUES, AgentContext

REGISTRY_MAX_TOKENS = 200
# The steering history a full block shows: the agent's last Q/A pairs with the orchestrator
# (seed 002's artifact serialises `steering_history[-10:]` in focus and flat windows alike).
HISTORY_TURNS = 10


@dataclass(frozen=True)
class Line:
    """One line of a block: its text (ending in "\\n"), ids, kind and what it shows.

    kind: "header" | "task" | "status" | "fact" | "decision" | "registry". shows: the
    (key id, value id) pairs the line reveals when fully visible: one for a fact or decision
    line, the decided pairs for a registry line.
    """

    text: str
    ids: tuple[int, ...]
    kind: str
    shows: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Block:
    """An agent's full-context block or registry entry, with its token ids and lines."""

    agent: int
    kind: str  # "full" | "registry"
    text: str
    ids: tuple[int, ...]
    lines: tuple[Line, ...]


@dataclass(frozen=True)
class LineSpan:
    """Where a line sits in the window's agent-block token sequence ([start, end))."""

    agent: int
    block: str
    kind: str
    start: int
    end: int
    shows: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class BlockSpan:
    agent: int
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Window:
    """An assembled window.

    tokens: cl100k count of `text` (<= budget whenever the request alone fits it).
    agent_tokens: tokens of the uncut agent blocks; kept: how many of them stay as whole lines
    (a line is visible iff its span's end <= kept); cut: whether anything was cut (in a focus
    window only F(a_i) itself when it alone exceeds the budget). compressed / dropped: the
    agents whose registry entries a focus window compressed or left out (fit_focus).
    visible_facts / visible_decisions: (agent, key id, value id) of the fact lines /
    decisions (decision lines and registry "decided" lists) that are fully visible.
    """

    text: str
    tokens: int
    request_tokens: int
    agent_tokens: int
    kept: int
    cut: bool
    blocks: tuple[BlockSpan, ...]
    lines: tuple[LineSpan, ...]
    visible_facts: tuple[tuple[int, int, int], ...]
    visible_decisions: tuple[tuple[int, int, int], ...]
    compressed: tuple[int, ...] = ()
    dropped: tuple[int, ...] = ()


@functools.lru_cache(maxsize=1 << 16)
def _line(text: str, kind: str, shows: tuple[tuple[int, int], ...] = ()) -> Line:
    """Memoised: a cascade decision rebuilds its agent's block, whose other lines are
    unchanged, so only the new decision line is encoded (Line is immutable)."""
    return Line(text, tuple(tokens.encode(text)), kind, shows)


def _block(agent: int, kind: str, lines: list[Line]) -> Block:
    text = "".join(line.text for line in lines)
    ids = tuple(itertools.chain.from_iterable(line.ids for line in lines))
    if tuple(tokens.encode(text)) != ids:  # the additivity the module docstring argues
        raise AssertionError(f"block of agent-{agent} does not encode line by line")
    return Block(agent, kind, text, ids, tuple(lines))


def _pair(key: int, value: int) -> str:
    name = KEYS[key]
    return f"{name} = {VALUES[name][value]}"


def history_line(agent: AgentContext, key: int, value: int) -> str:
    """One steering exchange: what the agent asked and the value the orchestrator gave
    (value -1: the request was lost to the focus cap and got no value)."""
    name = KEYS[key]
    answer = VALUES[name][value] if value >= 0 else "none"
    return f"history: Q: which {name} should {agent.name} use? A: {answer}\n"


def full_block(agent: AgentContext, decided: Mapping[int, int] | None = None,
               history: Sequence[tuple[int, int]] = ()) -> Block:
    """The agent's full context: header, task, status and fact lines (in the agent's seeded
    order), one "decision:" line per key decided so far (cascade), then its last
    HISTORY_TURNS steering exchanges (`history`: (key id, value id given) oldest first)."""
    lines = [_line(f"## {agent.name} (full context)\n", "header")]
    for kind, i in agent.lines:
        if kind == "task":
            lines.append(_line(f"task: {agent.task}\n", "task"))
        elif kind == "status":
            lines.append(_line(f"status: {agent.status[i]}\n", "status"))
        else:
            key, value = agent.facts[i]
            lines.append(_line(f"fact: {_pair(key, value)}\n", "fact", ((key, value),)))
    for key, value in (decided or {}).items():
        lines.append(_line(f"decision: {_pair(key, value)}\n", "decision", ((key, value),)))
    for key, value in list(history)[-HISTORY_TURNS:]:
        lines.append(_line(history_line(agent, key, value), "history"))
    return _block(agent.index, "full", lines)


def registry_block(agent: AgentContext, decided: Mapping[int, int] | None = None) -> Block:
    """The agent's registry entry (<= 200 tokens, asserted). `decided=None` leaves out the
    "decided" field (families without recorded decisions); {} shows "decided: none"."""
    header = _line(f"## {agent.name} (registry)\n", "header")
    words = agent.status[-1].split()
    shows = tuple((decided or {}).items())
    while True:
        status = " ".join(words)
        if len(words) < len(agent.status[-1].split()):
            status += " ..."
        text = f"{agent.name} | task: {agent.short_task} | status: {status}"
        if decided is not None:
            pairs = "; ".join(_pair(k, v) for k, v in shows) or "none"
            text += f" | decided: {pairs}"
        entry = _line(text + "\n", "registry", shows)
        if len(header.ids) + len(entry.ids) <= REGISTRY_MAX_TOKENS or len(words) <= 4:
            break
        words = words[:-4]
    block = _block(agent.index, "registry", [header, entry])
    assert len(block.ids) <= REGISTRY_MAX_TOKENS, f"registry entry of {agent.name} too long"
    return block


def compressed_block(agent: AgentContext, decided: Mapping[int, int] | None = None) -> Block:
    """The agent's registry entry compressed to its task (and, in cascade, its decisions, the
    only part another agent's request can depend on): what a dacs window keeps of an agent
    when the full entries do not fit, as seed 002's artifact keeps a task line."""
    header = _line(f"## {agent.name} (registry)\n", "header")
    text = f"{agent.name} | task: {agent.short_task}"
    shows = tuple((decided or {}).items())
    if decided is not None:
        text += " | decided: " + ("; ".join(_pair(k, v) for k, v in shows) or "none")
    return _block(agent.index, "registry", [header, _line(text + "\n", "registry", shows)])


def request_text(requester: str, key: str, options: Sequence[str], depends_on: str | None) -> str:
    """The request block (always last, never cut)."""
    ask = f"{requester} asks: which {key} should {requester} use?"
    if depends_on is not None:
        ask += f" It must match the {key} decided for {depends_on}."
    choices = " | ".join(f"{i}) {value}" for i, value in enumerate(options))
    return f"## request\n{ask}\noptions: {choices}\n"


def block_order(n_agents: int, requester: int, order: str, focused: int | None = None
                ) -> list[int]:
    """Agent indices in window order. natural: index order, with a focused agent's full
    block first (seed 002's F(a_i) + R_-i layout); requester_first / requester_last: index
    order with the requester moved first or last (position controls)."""
    if order == "natural":
        if focused is None or focused < 0:
            return list(range(n_agents))
        return [focused, *(i for i in range(n_agents) if i != focused)]
    others = [i for i in range(n_agents) if i != requester]
    return [requester, *others] if order == "requester_first" else [*others, requester]


def fit_focus(focused: int, full: Block, registry: Mapping[int, Block],
              compressed: Mapping[int, Block], sacrifice: Sequence[int], room: int
              ) -> tuple[dict[int, Block], tuple[int, ...], tuple[int, ...]]:
    """Seed 002's rule for a focus window: F(a_i) is never cut; when the blocks exceed
    `room`, the other agents' registry entries are compressed one at a time in `sacrifice`
    order, then dropped in the same order, until they fit. Returns agent -> block kept, the
    compressed agents and the dropped agents. If F(a_i) alone exceeds room, every other
    entry is dropped and the caller's prefix truncation cuts F(a_i) (Window.cut)."""
    kept: dict[int, Block] = {focused: full, **{j: b for j, b in registry.items()
                                                if j != focused}}
    total = sum(len(b.ids) for b in kept.values())
    squeezed: list[int] = []
    dropped: list[int] = []
    for j in sacrifice:
        if total <= room:
            break
        total += len(compressed[j].ids) - len(kept[j].ids)
        kept[j] = compressed[j]
        squeezed.append(j)
    for j in sacrifice:
        if total <= room:
            break
        total -= len(kept.pop(j).ids)
        dropped.append(j)
    return kept, tuple(j for j in squeezed if j not in dropped), tuple(dropped)


def assemble(blocks: Sequence[Block], request: str, budget: int) -> Window:
    """The window of `blocks` (already in window order) followed by `request`, cut to
    `budget` tokens by prefix truncation of the agent blocks."""
    request_ids = tokens.encode(request)
    n_request = len(request_ids)
    room = max(budget - n_request, 0)
    spans: list[LineSpan] = []
    block_spans: list[BlockSpan] = []
    at = 0
    for block in blocks:
        start = at
        for line in block.lines:
            spans.append(LineSpan(block.agent, block.kind, line.kind, at, at + len(line.ids),
                                  line.shows))
            at += len(line.ids)
        block_spans.append(BlockSpan(block.agent, block.kind, start, at))
    total = at
    if total <= room:
        text = "".join(block.text for block in blocks) + request
        kept, n_tokens, cut = total, total + n_request, False
    else:
        # Whole lines before the one the cut falls in, then as much of that line as fits.
        texts: list[str] = []
        for block in blocks:
            texts.extend(line.text for line in block.lines)
        first_cut = next(i for i, span in enumerate(spans) if span.end > room)
        kept = spans[first_cut].start
        ids = [i for block in blocks for line in block.lines for i in line.ids]
        partial, partial_tokens = "", 0
        for k in range(room, kept, -1):
            candidate = tokens.decode(ids[kept:k]) + "\n"
            n = tokens.count(candidate)
            if kept + n <= room:
                partial, partial_tokens = candidate, n
                break
        text = "".join(texts[:first_cut]) + partial + request
        n_tokens, cut = kept + partial_tokens + n_request, True
    facts, decisions = [], []
    for span in spans:
        if span.end > kept:
            break
        if span.kind == "fact":
            facts.extend((span.agent, k, v) for k, v in span.shows)
        elif span.kind in ("decision", "registry"):
            decisions.extend((span.agent, k, v) for k, v in span.shows)
    return Window(
        text=text,
        tokens=n_tokens,
        request_tokens=n_request,
        agent_tokens=total,
        kept=kept,
        cut=cut,
        blocks=tuple(block_spans),
        lines=tuple(spans),
        visible_facts=tuple(facts),
        visible_decisions=tuple(decisions),
    )
