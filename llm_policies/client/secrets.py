"""Keeping credentials out of every text a run writes: answers, errors, URLs, log lines.

Why a module of its own: a provider (or a proxy in front of it) can echo the API key back in
any form it likes: inside a normal answer, percent-encoded in a URL it quotes, escaped inside
a JSON string, or base64-encoded as a Basic credential. The client scrubs what it returns,
and every layer that writes text built from provider data (run logs, study sweeps) can call
the same `scrub(text, secrets)`.

What is caught, for each secret: the raw text; its percent-encodings (`quote` with and without
"/" kept, `quote_plus`, hex digits in either case); its JSON-string escapes (with and without
`ensure_ascii`, and escaped twice, as in JSON inside a JSON string); its base64 (standard and
URL-safe, with and without padding); the base64 of "user:password" for URL credentials (the
Basic header httpx builds from them); and its hex digits. Each of them is caught in any
letter case (a server may upper-case what it echoes: `SK-...`), and the encodings are also
made of the secret upper- and lower-cased (the base64 of an upper-cased key is not the
upper-cased base64 of the key). A copy is caught wherever it sits, joined to other words or
not; copies split across lines or interleaved with other text are not caught.

Secrets shorter than `MIN_SECRET_CHARS` are not scrubbed: replacing every "1" or "x" in an
answer would destroy it, and a credential that short protects nothing anyway.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6


def _percent_case_variants(text: str) -> set[str]:
    """Both upper- and lower-case hex digits after each "%" (encoders differ)."""
    if "%" not in text:
        return {text}
    return {text, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)}


def _base64_forms(data: bytes) -> set[str]:
    forms = set()
    for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        text = encoded.decode("ascii")
        forms.update({text, text.rstrip("=")})
    return forms


def secret_forms(secret: str) -> set[str]:
    """Every encoding of `secret`, as given and upper- and lower-cased, that `scrub` removes
    (in any letter case; empty for a too-short secret)."""
    if len(secret) < MIN_SECRET_CHARS:
        return set()
    forms: set[str] = set()
    for variant in dict.fromkeys((secret, secret.upper(), secret.lower())):
        forms |= _encodings(variant)
    return forms


def _encodings(secret: str) -> set[str]:
    forms = {secret}
    for encoded in (quote(secret), quote(secret, safe=""), quote_plus(secret)):
        forms |= _percent_case_variants(encoded)
    for ascii_only in (True, False):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        twice = json.dumps(once, ensure_ascii=ascii_only)[1:-1]
        forms.update({once, twice})
    raw = secret.encode("utf-8")
    forms |= _base64_forms(raw)
    forms.update({raw.hex(), raw.hex().upper()})
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def basic_auth_forms(user: str, password: str) -> set[str]:
    """The base64 credential of an HTTP Basic header built from `user` and `password`."""
    if len(password) < MIN_SECRET_CHARS and len(user) < MIN_SECRET_CHARS:
        return set()
    return _base64_forms(f"{user}:{password}".encode())


@lru_cache(maxsize=64)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    forms: set[str] = set()
    for secret in secrets:
        forms |= secret_forms(secret)
    if not forms:
        return None
    # Longest first, so that an encoding containing another form is removed whole.
    ordered = sorted(forms, key=lambda form: (-len(form), form))
    return re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every known encoding of every secret replaced by "[REDACTED]"."""
    pattern = _pattern(frozenset(s for s in secrets if s))
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def url_secrets(url: str) -> tuple[str, ...]:
    """The user name and password in a URL's userinfo (either may be a credential), and the
    base64 forms of the Basic header built from them."""
    try:
        parts = urlsplit(url)
        user, password = parts.username or "", parts.password or ""
    except ValueError:
        return ()
    plain_user, plain_password = unquote(user), unquote(password)  # what Basic auth sends
    found = tuple(dict.fromkeys(s for s in (user, password, plain_user, plain_password) if s))
    if not found:
        return ()
    return (*found, *sorted(basic_auth_forms(plain_user, plain_password)))


def redact_url(url: str) -> str:
    """`url` without its userinfo ("user:pass@"), for anything that is shown or written."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return REDACTED
    if "@" not in parts.netloc:
        return url
    netloc = host or ""
    if ":" in netloc:  # an IPv6 literal
        netloc = f"[{netloc}]"
    if port is not None:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
