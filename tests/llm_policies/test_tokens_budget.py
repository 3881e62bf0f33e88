"""Offline cl100k_base accounting and RCWT fixed-budget assembly (seed 000, section 3.1).

The budget sweep is only meaningful if every count is exact for the text actually sent, so
the central property is: each block has its target count on its own, the joined text
tokenizes as the concatenation of the blocks, and so tokens == u + c + r == W (less exactly
the blocks the small-block rule drops).
"""

from __future__ import annotations

import math
import socket
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.envs._core import tokens
from diagym.llm_policies.prompts.budget import ARTIFACT_DROP, LAYOUTS, assemble, fit_block

SOURCE = st.text(min_size=1, max_size=200).filter(lambda s: s.strip() != "")
ANY_TEXT = st.text(max_size=200)


def test_hello_world_ids() -> None:
    assert tokens.encode("hello world") == [15339, 1917]
    assert tokens.count("hello world") == 2
    assert tokens.decode([15339, 1917]) == "hello world"


@given(ANY_TEXT)
def test_encode_decode_round_trip(text: str) -> None:
    ids = tokens.encode(text)
    assert tokens.decode(ids) == text
    assert tokens.count(text) == len(ids)


def test_special_token_strings_are_plain_text() -> None:
    assert tokens.decode(tokens.encode("<|endoftext|>")) == "<|endoftext|>"


def forget_the_encoding() -> None:
    """Drop the loaded encoding here and in tiktoken's registry, so the next use loads afresh."""
    tokens.encoding.cache_clear()
    tiktoken.registry.ENCODINGS.pop(tokens.ENCODING_NAME, None)


def test_loading_never_opens_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    forget_the_encoding()
    try:
        assert tokens.encode("hello world") == [15339, 1917]
    finally:
        forget_the_encoding()


@settings(max_examples=200, deadline=None)
@given(
    instructions=ANY_TEXT,
    coordination=SOURCE,
    evidence=SOURCE,
    extra=st.integers(0, 300),
    q=st.floats(0, 1),
    order=st.sampled_from(["coord_first", "reason_first"]),
)
def test_assembly_is_exact(
    instructions: str, coordination: str, evidence: str, extra: int, q: float, order: str
) -> None:
    head = instructions if not instructions or instructions.endswith("\n") else instructions + "\n"
    W = max(tokens.count(head), 1) + extra
    a = assemble(instructions, coordination, evidence, W=W, q=q, order=order)
    assert a.u == tokens.count(head) and a.blocks[0] == head
    assert a.u + a.c + a.r == W == a.W
    assert a.c == math.floor(q * (W - a.u))
    assert a.p == a.c / W and a.q == q and a.order == order
    targets = (a.u, a.c, a.r) if order == "coord_first" else (a.u, a.r, a.c)
    assert [tokens.count(b) for b in a.blocks] == list(targets)
    # The exactness guarantee: block tokenizations concatenate, and the total is W.
    assert a.text == "".join(a.blocks)
    assert tokens.encode(a.text) == [t for b in a.blocks for t in tokens.encode(b)]
    assert a.tokens == len(tokens.encode(a.text)) == W


@settings(max_examples=200, deadline=None)
@given(
    instructions=ANY_TEXT,
    coordination=SOURCE,
    evidence=SOURCE,
    extra=st.integers(0, 300),
    q=st.floats(0, 1),
    order=st.sampled_from(["coord_first", "reason_first"]),
    drop=st.sampled_from([0, ARTIFACT_DROP, 40]),
)
def test_task_last_assembly_is_exact(
    instructions: str, coordination: str, evidence: str, extra: int, q: float, order: str,
    drop: int,
) -> None:
    head = instructions.lstrip()
    W = max(tokens.count(head), 1) + extra
    a = assemble(instructions, coordination, evidence, W=W, q=q, order=order,
                 layout="context_system", drop_at_most=drop)
    assert a.u == tokens.count(head) and a.blocks[2] == head == a.user
    assert a.c_target == math.floor(q * (W - a.u)) and a.u + a.c_target + a.r_target == W
    for name, target, sent in (("coordination", a.c_target, a.c), ("evidence", a.r_target, a.r)):
        assert (name in a.dropped) == (0 < target <= drop)
        assert sent == (0 if name in a.dropped else target)
        assert tokens.count(a.block(name)) == sent
    assert a.p == a.c / W
    # Exact on the text sent, as one string and as two messages.
    assert a.text == "".join(a.blocks) == a.system + a.user
    assert tokens.encode(a.text) == [t for b in a.blocks for t in tokens.encode(b)]
    assert a.tokens == len(tokens.encode(a.text)) == a.u + a.c + a.r
    assert a.tokens == W - sum(a.c_target if n == "coordination" else a.r_target
                               for n in a.dropped)
    assert sum(tokens.count(m["content"]) for m in a.messages()) == a.tokens


def test_the_artifact_layout_puts_context_in_the_system_message_and_the_task_last() -> None:
    for order, first in (("coord_first", "Coordination"), ("reason_first", "Evidence")):
        a = assemble("Answer the question.", "Coordination note. ", "Evidence line. ", W=80,
                     q=0.5, order=order, layout="context_system")
        system, user = a.messages()
        assert system["role"] == "system" and user["role"] == "user"
        assert user["content"] == "Answer the question."
        assert system["content"].startswith(first)
        assert "Coordination note" in system["content"] and "Evidence line" in system["content"]
        assert "Answer the question" not in system["content"]
        assert a.text.endswith("Answer the question.")  # read last in the one-string view too
        assert a.messages(system_role=False) == [{"role": "user", "content": a.text}]
    old = assemble("Answer the question.", "Coordination note. ", "Evidence line. ", W=80, q=0.5)
    assert old.layout == "instructions_first" and old.text.startswith("Answer the question.\n")
    assert old.messages() == [{"role": "user", "content": old.text}]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_blocks_of_at_most_ten_tokens_are_dropped_and_eleven_kept(layout: str) -> None:
    """The artifact's rule at its boundary: a target of exactly 10 tokens is not sent, 11 is.
    W - u = 100, so q = 0.10 / 0.11 gives c = 10 / 11, and q = 0.90 / 0.89 gives r = 10 / 11."""
    instructions = "Rules."
    u = tokens.count(instructions if layout == "context_system" else instructions + "\n")
    kwargs: dict[str, Any] = {"W": u + 100, "layout": layout, "drop_at_most": ARTIFACT_DROP}
    source = "alpha beta gamma delta. "
    for q, name, target in ((0.10, "coordination", 10), (0.90, "evidence", 10),
                            (0.11, "coordination", 11), (0.89, "evidence", 11)):
        a = assemble(instructions, source, source, q=q, **kwargs)
        assert (a.c_target if name == "coordination" else a.r_target) == target
        sent = a.c if name == "coordination" else a.r
        if target <= ARTIFACT_DROP:
            assert a.dropped == (name,) and sent == 0 and a.block(name) == ""
            assert a.tokens == kwargs["W"] - target
        else:
            assert a.dropped == () and sent == target
            assert tokens.count(a.block(name)) == target and a.tokens == kwargs["W"]
        kept = assemble(instructions, source, source, q=q, **{**kwargs, "drop_at_most": 0})
        assert kept.dropped == () and kept.tokens == kwargs["W"]


def test_orders_place_the_blocks() -> None:
    kwargs: dict[str, Any] = {"W": 60, "q": 0.5}
    first = assemble("Rules.", "Coordination note. ", "Evidence line. ", order="coord_first",
                     **kwargs)
    assert first.blocks[1].startswith("Coordination") and first.blocks[2].startswith("Evidence")
    second = assemble("Rules.", "Coordination note. ", "Evidence line. ", **kwargs)
    assert second.order == "reason_first"
    assert second.blocks[1].startswith("Evidence") and second.blocks[2].startswith("Coordination")


def test_fit_block_repeats_and_truncates_exactly() -> None:
    # Ends with a newline, so copies tokenize independently and the cuts are predictable.
    text = "The cache holds two registers.\n"
    n = tokens.count(text)
    assert fit_block(text, n) == text
    assert fit_block(text, 3 * n) == text * 3
    assert fit_block(text, 2 * n + 2) == text * 2 + "The cache"
    assert fit_block(text, 3) == "The cache holds"
    assert fit_block(text, 0) == ""
    ended = fit_block(text, 4, end_with_newline=True)
    assert ended == "The cache holds\n" and tokens.count(ended) == 4


@settings(max_examples=200, deadline=None)
@given(SOURCE, st.integers(0, 400), st.booleans())
def test_fit_block_count_is_exact(text: str, n: int, newline: bool) -> None:
    block = fit_block(text, n, end_with_newline=newline)
    assert tokens.count(block) == n
    if n and newline:
        assert block.endswith("\n")


def test_multi_token_characters_still_fit_exactly() -> None:
    for n in range(1, 12):
        for newline in (False, True):
            assert tokens.count(fit_block("😀", n, end_with_newline=newline)) == n


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"W": 0}, "W must be an integer >= 1; got 0"),
        ({"W": 2.5}, "W must be an integer >= 1; got 2.5"),
        ({"q": 1.5}, "q must be a number in [0, 1]; got 1.5"),
        ({"q": -0.1}, "q must be a number in [0, 1]; got -0.1"),
        ({"q": float("nan")}, "q must be a number in [0, 1]; got nan"),
        ({"order": "sideways"},
         "order must be one of 'coord_first' | 'reason_first'; got 'sideways'"),
        ({"layout": "sideways"},
         "layout must be one of 'context_system' | 'instructions_first'; got 'sideways'"),
        ({"drop_at_most": -1}, "drop_at_most must be an integer >= 0; got -1"),
        ({"W": 3}, "the instruction block has u=6 tokens, more than the budget W=3"),
        ({"coordination": " \n"},
         "the coordination text is empty (or only whitespace) but its block needs 47 tokens "
         "(W=100, q=0.5)"),
        ({"evidence": "", "q": 0.0},
         "the evidence text is empty (or only whitespace) but its block needs 94 tokens "
         "(W=100, q=0.0)"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "instructions": "Answer in one word please.",
        "coordination": "coord ",
        "evidence": "evidence ",
        "W": 100,
        "q": 0.5,
        "order": "reason_first",
    }
    args.update(kwargs)
    with pytest.raises(ValueError) as err:
        assemble(**args)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_empty_sources_are_fine_with_zero_targets() -> None:
    a = assemble("Rules.", "", "evidence", W=10, q=0.0)
    assert a.c == 0 and a.tokens == 10
    b = assemble("Rules.", "coordination", "", W=10, q=1.0)
    assert b.r == 0 and b.tokens == 10


def test_fit_block_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^n_tokens must be an integer >= 0; got -1$"):
        fit_block("x", -1)
    with pytest.raises(ValueError, match=r"^cannot fit an empty text to n_tokens=2 \(> 0\)$"):
        fit_block("", 2)
