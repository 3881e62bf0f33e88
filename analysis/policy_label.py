"""A policy's description (its describe(), as a run log, a diagnosis or a summary records it)
named the way a person reads it, so every command and report names one policy alike.

Why here: the descriptions are made at every layer (a controller's and a user's policy in
controllers/, a chat model's in llm_policies/, a faulted controller's in analysis/diagnose/),
and the commands that print them (diagnose, summarize, report) sit in different rooms of
analysis/; the lowest room of analysis/ is below all of them. Machine-readable outputs
(diagnosis.json, --json, run logs) keep the description itself.
"""

from __future__ import annotations

import json
from typing import Any


def policy_label(policy: Any) -> str:
    """A policy description in a few words: a controller's name, a user's policy by the
    import spec it was loaded by, a chat model's model and harness, an RCWT sweep's reader
    with the switches it has on, else the description as JSON."""
    if isinstance(policy, dict):
        if isinstance(policy.get("import"), str):
            return policy["import"]
        for key in ("controller", "dacs_controller"):
            if set(policy) == {key}:
                return str(policy[key])
        model = policy.get("model") or policy.get("llm")
        if model:
            harness = policy.get("harness")
            return f"{model}" + (f" ({harness})" if harness else "")
        if isinstance(policy.get("policy"), str):  # an RCWT sweep's reader, and its switches
            on = sorted(k for k, v in policy.items() if k != "policy" and v is True)
            return policy["policy"] + (f" ({', '.join(on)})" if on else "")
        return json.dumps(policy, sort_keys=True)
    return str(policy)
