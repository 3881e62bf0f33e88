"""Fixed-budget prompt assembly with exact cl100k_base accounting (RCWT, seed 000, sec. 3.1).

RCWT holds the window W fixed and moves tokens between three blocks: u (task instructions,
never cut), c (coordination) and r (task evidence), with u + c + r = W, c = floor(q (W - u))
for the target ratio q and r = W - u - c; the realized coordination share is p = c / W. The
coordination and evidence templates are repeated (whole copies, then a prefix) or
prefix-truncated to exactly c and r tokens. The displacement effect is measured in tokens, so
the counts must hold for the text actually sent, not only for the pieces it was built from.

Orders. The paper names the two orders `coord_first` and `reason_first` without spelling out
the layout; we read "reason" as the task/reference block the model reasons over, and keep the
task instructions first in both (they frame the call): `coord_first` = instructions,
coordination, evidence; `reason_first` = instructions, evidence, coordination.

Exactness. Tokenizing a concatenation can differ from concatenating tokenizations (a block
end and the next block start can merge, and a token-level cut can split a multi-byte
character, which does not decode to a prefix of the text). We therefore work with texts, not
id lists, and make every block boundary a pre-tokenization boundary of cl100k_base:

1. Every block that is followed by another one ends with "\\n" (the instructions get one
   appended if they lack it; a fitted block is built to end with one), and every block after
   the first starts with a non-whitespace character (leading whitespace of the coordination
   and evidence sources is dropped). cl100k_base's split pattern has no look-behind, and
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
count(block) == target for each block, encode(text) == encode(b0) + encode(b1) + encode(b2),
and so tokens == len(encode(text)) == u + c + r == W.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from envs._core.tokens import count, encode, encoding

ORDERS = ("coord_first", "reason_first")
_FILLER = "000"  # one cl100k_base token after a newline, and runs of it chunk by three digits
_SEARCH = 8  # characters examined either side of the token-level cut


@dataclass(frozen=True)
class Assembly:
    """One prompt assembled under a fixed budget W.

    blocks: the three block texts in prompt order (see `order`); text == "".join(blocks).
    u, c, r: instruction, coordination and evidence tokens (u + c + r == W).
    q: the target ratio c / (W - u) that was asked for; p = c / W, the realized share.
    tokens: len(encode(text)), which equals W by construction.
    """

    text: str
    blocks: tuple[str, str, str]
    u: int
    c: int
    r: int
    W: int
    q: float
    p: float
    order: str
    tokens: int


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


def _check_params(W: int, q: float, order: str) -> None:
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
) -> Assembly:
    """Assemble instructions, coordination and evidence into exactly W cl100k_base tokens.

    The instruction block is the instructions verbatim plus a "\\n" if they do not end with
    one (omitted when the instructions are empty); u counts that block. Leading whitespace of
    the coordination and evidence sources is dropped, then they are fitted to c and r tokens.
    Raises ValueError for W < 1, q outside [0, 1], an unknown order, u > W, or an empty
    coordination / evidence source with a positive target.
    """
    _check_params(W, q, order)
    head = instructions if not instructions or instructions.endswith("\n") else instructions + "\n"
    u = count(head)
    if u > W:
        raise ValueError(f"the instruction block has u={u} tokens, more than the budget W={W}")
    c, r = split_budget(W, u, q)
    sources = {"coordination": (coordination.lstrip(), c), "evidence": (evidence.lstrip(), r)}
    for name, (source, target) in sources.items():
        if target > 0 and not source:
            raise ValueError(
                f"the {name} text is empty (or only whitespace) but its block needs "
                f"{target} tokens (W={W}, q={q})"
            )
    names = ("coordination", "evidence") if order == "coord_first" else ("evidence", "coordination")
    middle = fit_block(*sources[names[0]], end_with_newline=True)
    last = fit_block(*sources[names[1]])
    blocks = (head, middle, last)
    text = "".join(blocks)
    tokens = count(text)
    if tokens != W:  # the boundary argument of the module docstring; never seen to fail
        raise RuntimeError(f"assembled {tokens} tokens for W={W}: block boundaries merged")
    return Assembly(
        text=text, blocks=blocks, u=u, c=c, r=r, W=W, q=q, p=c / W, order=order, tokens=tokens
    )
