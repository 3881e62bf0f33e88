"""Fixed-budget prompt assembly with exact cl100k_base accounting (RCWT, seed 000, sec. 3.1).

RCWT holds the window W fixed and moves tokens between three blocks: u (task instructions,
never cut), c (coordination) and r (task evidence), with u + c + r = W, c = floor(q (W - u))
for the target ratio q and r = W - u - c; the realized coordination share is p = c / W. The
coordination and evidence templates are repeated (whole copies, then a prefix) or
prefix-truncated to exactly c and r tokens. The displacement effect is measured in tokens, so
the counts must hold for the text actually sent, not only for the pieces it was built from.

Orders and layouts. The two orders place the coordination and evidence blocks:
`coord_first` = coordination, evidence; `reason_first` = evidence, coordination ("reason" is
the task/reference block the model reasons over). Where the task instructions go is the
layout, named in LAYOUTS:

* `context_system` (seed 000's artifact, `rcwt_controlled.py`): the two context blocks, in the
  order's sequence, are the system message and the task instructions are the user message, so
  the task is read last. `Assembly.text` is the same content as one string (system, then
  user), for a single-message call or a reader of text.
* `instructions_first`: one text, instructions, then the two blocks in the order's sequence.
  `assemble`'s default, because the StatefulWorkflow renderer builds its prompts on it.

Small blocks. The artifact sends a context block only when its target exceeds 10 tokens
(`ARTIFACT_DROP`); `drop_at_most=n` drops a coordination or evidence block whose target is
1..n tokens (0, the default, keeps every block). The targets still follow the paper's rule,
c = floor(q (W - u)) and r = W - u - c; a dropped block is sent as nothing, so the prompt
then has W minus its target tokens, and `c` / `r` (and p = c / W) count what is sent.
u + c + r == tokens always holds exactly, and equals W exactly when nothing is dropped.

Exactness. Tokenizing a concatenation can differ from concatenating tokenizations (a block
end and the next block start can merge, and a token-level cut can split a multi-byte
character, which does not decode to a prefix of the text). We therefore work with texts, not
id lists, and make every block boundary a pre-tokenization boundary of cl100k_base:

1. Every block that is followed by another one ends with "\\n" (the instructions get one
   appended if they lack it; a fitted block is built to end with one; in `context_system`
   both context blocks are, since the task follows them in `text`), and every block after
   the first starts with a non-whitespace character (leading whitespace of the coordination
   and evidence sources, and in `context_system` of the instructions, is dropped).
   cl100k_base's split pattern has no look-behind, and
   after "\\n" + non-whitespace no pattern alternative can span the newline (punctuation
   runs, letter runs, digit runs and whitespace runs all stop there), so
   encode(a + b) == encode(a) + encode(b) at such a boundary.
2. `fit_block` returns a text whose own encoding has exactly n tokens: normally a character
   prefix of the repeated source (whole copies, then a prefix; searched near the token-level
   cut so no character is split). Only when no nearby character prefix has exactly n tokens
   (a character worth several tokens straddles the cut) does it take the longest shorter
   prefix, a "\\n", and "000" fillers, each exactly one token after a newline (and, when
   even the first character is too long, fillers alone, or ".\\n" for a one-token block
   that must end with a newline). Either way the block starts with its source's first
   character or a digit.

Guarantee (checked on every call, and by property tests): for the returned Assembly,
count(block) == its sent count for each block, encode(text) == encode(b0) + encode(b1) +
encode(b2), and so tokens == len(encode(text)) == u + c + r (== W when nothing is dropped).
In `context_system`, count(system) + count(user) == tokens as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from diagym.envs._core.tokens import count, encode, encoding

ORDERS = ("coord_first", "reason_first")
LAYOUTS = ("context_system", "instructions_first")
ARTIFACT_LAYOUT = "context_system"
ARTIFACT_DROP = 10  # seed 000's artifact sends a context block only if it has > 10 tokens
_FILLER = "000"  # one cl100k_base token after a newline, and runs of it chunk by three digits
_SEARCH = 8  # characters examined either side of the token-level cut


@dataclass(frozen=True)
class Assembly:
    """One prompt assembled under a fixed budget W.

    blocks: the three block texts in reading order, named by `names` ("instructions",
        "coordination", "evidence"); a dropped or empty block is ""; text == "".join(blocks).
    newline_added: per block, whether its last "\\n" was appended to the fitted text (so the
        block minus that newline is a prefix of its repeated source).
    u, c, r: instruction, coordination and evidence tokens as sent (u + c + r == tokens).
    c_target, r_target: the paper's c = floor(q (W - u)) and r = W - u - c.
    dropped: the names of the blocks dropped by the small-block rule (module docstring).
    q: the target ratio asked for; p = c / W, the realised share of what is sent.
    system, user: the two messages of `context_system` (system "" when both context blocks
        are empty); in `instructions_first` system is "" and user is the whole text.
    tokens: len(encode(text)), which equals W unless a block was dropped.
    """

    text: str
    blocks: tuple[str, str, str]
    names: tuple[str, str, str]
    newline_added: tuple[bool, bool, bool]
    u: int
    c: int
    r: int
    c_target: int
    r_target: int
    W: int
    q: float
    p: float
    order: str
    layout: str
    dropped: tuple[str, ...]
    system: str
    user: str
    tokens: int

    def block(self, name: str) -> str:
        """The block called `name` ("instructions", "coordination" or "evidence")."""
        return self.blocks[self.names.index(name)]

    def messages(self, system_role: bool = True) -> list[dict[str, str]]:
        """Chat messages: [system, user] in `context_system` with a system role (the system
        message omitted when empty), else one user message holding `text`."""
        if system_role and self.system:
            return [{"role": "system", "content": self.system},
                    {"role": "user", "content": self.user}]
        return [{"role": "user", "content": self.text}]


def _repeated(text: str, n_tokens: int) -> str:
    """Enough whole copies of `text` that it has more than n_tokens tokens (plus one copy)."""
    per_copy = max(count(text), 1)
    return text * (n_tokens // per_copy + 2)


def _char_cut(source: str, n_tokens: int) -> int:
    """Characters of `source` covered by its first n_tokens tokens, not splitting a character."""
    if n_tokens <= 0:
        return 0
    head = encoding().decode_bytes(encode(source)[:n_tokens])
    return len(head.decode("utf-8", errors="ignore"))


def fit_block(text: str, n_tokens: int, *, end_with_newline: bool = False) -> str:
    """`text` repeated (whole copies, then a prefix) or prefix-truncated so that its own
    cl100k_base encoding has exactly n_tokens tokens.

    With end_with_newline the result also ends with "\\n" (the newline counts toward
    n_tokens), which makes it safe to concatenate with a following block (module docstring).
    See the module docstring for the rare filler fallback.
    """
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
        raise ValueError(f"n_tokens must be an integer >= 0; got {n_tokens!r}")
    if n_tokens == 0:
        return ""
    if not text:
        raise ValueError(f"cannot fit an empty text to n_tokens={n_tokens} (> 0)")
    suffix = "\n" if end_with_newline else ""
    body_tokens = n_tokens - len(suffix)
    source = _repeated(text, body_tokens)
    cut = _char_cut(source, body_tokens)
    # 1. A character prefix of the repeated source, nearest the token-level cut first.
    for delta in sorted(range(-_SEARCH, _SEARCH + 1), key=abs):
        m = cut + delta
        if 1 <= m <= len(source):  # non-empty: the block starts as its source does
            candidate = source[:m] + suffix
            if count(candidate) == n_tokens:
                return candidate
    # 2. The longest shorter prefix, a newline, then one-token fillers (and the suffix). The
    # prefix is non-empty so the block starts as its source does (assemble relies on that).
    for m in range(min(cut + _SEARCH, len(source)), 0, -1):
        base = source[:m] + "\n"
        missing = n_tokens - count(base) - len(suffix)
        if missing >= 1 or (missing == 0 and not suffix):
            candidate = base + _FILLER * missing + suffix
            if count(candidate) == n_tokens:
                return candidate
    # 3. Fillers alone (a source whose first character alone has more than n_tokens tokens).
    # (for n_tokens == 1 with a newline end, ".\n": one token, not starting with whitespace).
    candidate = _FILLER * body_tokens + suffix if body_tokens else ".\n"
    if count(candidate) == n_tokens:
        return candidate
    raise RuntimeError(f"could not fit a block to exactly {n_tokens} tokens")  # unreachable


def _check_params(W: int, q: float, order: str, layout: str, drop_at_most: int) -> None:
    if isinstance(W, bool) or not isinstance(W, int) or W < 1:
        raise ValueError(f"W must be an integer >= 1; got {W!r}")
    if (
        isinstance(q, bool)
        or not isinstance(q, int | float)
        or not math.isfinite(q)
        or not 0 <= q <= 1
    ):
        raise ValueError(f"q must be a number in [0, 1]; got {q!r}")
    if order not in ORDERS:
        allowed = " | ".join(repr(o) for o in ORDERS)
        raise ValueError(f"order must be one of {allowed}; got {order!r}")
    if layout not in LAYOUTS:
        allowed = " | ".join(repr(name) for name in LAYOUTS)
        raise ValueError(f"layout must be one of {allowed}; got {layout!r}")
    if isinstance(drop_at_most, bool) or not isinstance(drop_at_most, int) or drop_at_most < 0:
        raise ValueError(f"drop_at_most must be an integer >= 0; got {drop_at_most!r}")


def split_budget(W: int, u: int, q: float) -> tuple[int, int]:
    """(c, r) for window W, instruction tokens u and target ratio q: c = floor(q (W - u))."""
    c = math.floor(q * (W - u))
    return c, W - u - c


def assemble(
    instructions: str,
    coordination: str,
    evidence: str,
    *,
    W: int,
    q: float,
    order: str = "reason_first",
    layout: str = "instructions_first",
    drop_at_most: int = 0,
) -> Assembly:
    """Assemble instructions, coordination and evidence into exactly W cl100k_base tokens
    (fewer only by the blocks the small-block rule drops).

    In `instructions_first` the instruction block is the instructions verbatim plus a "\\n"
    if they do not end with one (omitted when the instructions are empty); in
    `context_system` it is the instructions without leading whitespace. u counts that block.
    Leading whitespace of the coordination and evidence sources is dropped, then they are
    fitted to c and r tokens, or dropped when their target is 1..drop_at_most tokens.
    Raises ValueError for W < 1, q outside [0, 1], an unknown order or layout, a negative
    drop_at_most, u > W, or an empty coordination / evidence source with a positive target
    that is not dropped.
    """
    _check_params(W, q, order, layout, drop_at_most)
    if layout == "context_system":
        head = instructions.lstrip()
    else:
        head = instructions if not instructions or instructions.endswith("\n") else (
            instructions + "\n")
    u = count(head)
    if u > W:
        raise ValueError(f"the instruction block has u={u} tokens, more than the budget W={W}")
    c_target, r_target = split_budget(W, u, q)
    targets = {"coordination": c_target, "evidence": r_target}
    dropped = tuple(name for name in ("coordination", "evidence")
                    if 0 < targets[name] <= drop_at_most)
    sent = {name: 0 if name in dropped else targets[name] for name in targets}
    sources = {"coordination": coordination.lstrip(), "evidence": evidence.lstrip()}
    for name, source in sources.items():
        if sent[name] > 0 and not source:
            raise ValueError(
                f"the {name} text is empty (or only whitespace) but its block needs "
                f"{sent[name]} tokens (W={W}, q={q})"
            )
    context = ("coordination", "evidence") if order == "coord_first" else (
        "evidence", "coordination")
    if layout == "context_system":
        names = (*context, "instructions")
        ends = (True, True, False)
    else:
        names = ("instructions", *context)
        ends = (False, True, False)
    blocks_list, added = [], []
    for name, newline in zip(names, ends, strict=True):
        if name == "instructions":
            blocks_list.append(head)
            added.append(False)
        else:
            blocks_list.append(fit_block(sources[name], sent[name], end_with_newline=newline))
            added.append(newline and sent[name] > 0)
    blocks = (blocks_list[0], blocks_list[1], blocks_list[2])
    text = "".join(blocks)
    tokens = count(text)
    c, r = sent["coordination"], sent["evidence"]
    if tokens != u + c + r:  # the boundary argument of the module docstring; never seen to fail
        raise RuntimeError(f"assembled {tokens} tokens for u + c + r = {u + c + r}: block "
                           "boundaries merged")
    if layout == "context_system":
        system, user = blocks[0] + blocks[1], blocks[2]
    else:
        system, user = "", text
    return Assembly(
        text=text, blocks=blocks, names=names, newline_added=(added[0], added[1], added[2]),
        u=u, c=c, r=r, c_target=c_target, r_target=r_target, W=W, q=q, p=c / W, order=order,
        layout=layout, dropped=dropped, system=system, user=user, tokens=tokens,
    )
