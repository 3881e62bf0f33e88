"""The parameter checks every env's params dataclass uses, so a bad knob reads the same anywhere.

Each check returns the value in its plain Python type or raises one ValueError that names the
parameter, what is allowed and what was given; a params dataclass calls one per field in
`__post_init__`, which is the only place a knob is validated, and the envs check seeds and
render modes with the same functions.

An unknown keyword is refused with `UnknownParameterError`, both a TypeError worded as
Python words one ("got an unexpected keyword argument 'x'") and a ValueError like every other
bad knob: wrappers such as torchrl's GymEnv pass an optional keyword (frameskip=1) and retry
without it only on that TypeError, and callers that catch ValueError keep working.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

import numpy as np

MAX_SEED = 2**63 - 1  # seeds are int64 task seeds in the kernels


def is_integer(value: Any) -> bool:
    """A Python or numpy integer and not a bool: a bool given as a count or a seed is more
    often a slip than a choice (True would otherwise play seed 1)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value: Any, low: int, high: int | None = None,
              allowed: str | None = None) -> int:
    """An integer in low..high (high None: no upper bound). `allowed` words the valid values
    in the message; by default "an integer in low..high" or "an integer >= low"."""
    if allowed is None:
        allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
    if not is_integer(value):
        kind = allowed if allowed.startswith("an integer") else f"an integer ({allowed})"
        raise ValueError(f"{name} must be {kind}; got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {allowed}; got {value}")
    return value


def check_seed(value: Any, name: str = "seed") -> int | None:
    """None (let the env draw one) or a task seed in 0..2**63-1."""
    if value is None:
        return None
    return check_int(name, value, 0, MAX_SEED, "an integer in 0..2**63-1")


def check_render_mode(value: Any, modes: list[str]) -> str | None:
    """None or one of an env's declared render modes (its metadata["render_modes"])."""
    if value is not None and (not isinstance(value, str) or value not in modes):
        allowed = " | ".join(["None", *(repr(m) for m in modes)])
        raise ValueError(f"render_mode must be one of {allowed}; got {value!r}")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of the strings `choices`."""
    if not isinstance(value, str) or value not in choices:
        allowed = " | ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
    return str(value)


def check_bool(name: str, value: Any) -> bool:
    """A bool (numpy's included); 0 and 1 are refused, since a flag given as a number is
    more often a misplaced count than a choice."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True | False; got {value!r}")
    return bool(value)


def check_nonnegative(name: str, value: Any) -> float:
    """A finite real number >= 0 (an integer too large for a float is not finite here)."""
    if (isinstance(value, bool | np.bool_)
            or not isinstance(value, int | float | np.integer | np.floating)
            or not _finite(value) or value < 0):
        raise ValueError(f"{name} must be a finite number >= 0; got {reprlib.repr(value)}")
    return float(value)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # 10**400: no float holds it
        return False


class UnknownParameterError(TypeError, ValueError):
    """A keyword argument that is no parameter of the env (module docstring)."""


def check_known(kind: str, names: Any, known: Any) -> None:
    """Refuse keyword arguments that are not parameters of `kind` (UnknownParameterError),
    naming them and listing the known ones."""
    known = sorted(known)
    unknown = sorted(set(names) - set(known))
    if len(unknown) == 1:
        raise UnknownParameterError(f"{kind} got an unexpected keyword argument "
                                    f"{unknown[0]!r}; allowed: {known}")
    if unknown:
        raise UnknownParameterError(f"{kind} got unexpected keyword arguments "
                                    f"{', '.join(map(repr, unknown))}; allowed: {known}")
