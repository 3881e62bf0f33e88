"""What went wrong in a step, as every diagym env reports it: info["failure"] is an integer
code, 0 for none, in the single envs and (as an array) in the vector envs alike.

Why codes and not names: a vector of envs stacks each info key into an array, and
Gymnasium's vector envs and torchrl's GymEnv need numbers there (an array of None, or of
strings, is an object array that torchrl cannot make a tensor of). One table serves every
family, so a code names its failure without the env: StatefulWorkflow's kernel codes come
first (envs/workflow/layout.py), DACSSteering's "wrong" after them. The text layer
(TextActionWrapper) and the run logs speak names: `failure_name` is the one translation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FAILURES", "NO_FAILURE", "failure_name"]

FAILURES: tuple[str | None, ...] = (None, "dependency", "candidate", "completed", "wrong")
NO_FAILURE = 0


def failure_name(value: Any) -> str | None:
    """The name of a step's failure: None for code 0 (or None), the table's name for a code,
    and a name (a text layer's category, "invalid_json", ...) as it is."""
    if value is None or isinstance(value, str):
        return value
    code = int(value)
    if not 0 <= code < len(FAILURES):
        raise ValueError(f"failure must be a code in 0..{len(FAILURES) - 1} or a name; "
                         f"got {value!r}")
    return FAILURES[code]
