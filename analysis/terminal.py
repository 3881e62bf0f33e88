"""Text from outside (a server's reply or error body, a file's contents or name, an env id)
made safe for a terminal: every line diagym writes to stderr with such text in it (the error
line, a warning, a progress line) passes it through `shown`, so a hostile server or file
cannot move the cursor, recolour the terminal or ring its bell."""

from __future__ import annotations


def shown(text: str) -> str:
    """`text` safe to print on a terminal, on one line: control characters (a server's
    escape codes, newlines) escaped as \\x1b, \\n, ... instead of acted on."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
