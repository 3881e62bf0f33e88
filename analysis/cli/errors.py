"""The one way a command reports a user error: it raises, and `diagym.analysis.cli.main` prints one
`diagym <command>: error: <message>` line and exits with status 2 (argparse's own errors
have the same shape and status, from `OneLineParser`).

A command raises `UsageError` for a mistake it finds itself; the library's own refusals
(a ValueError naming the setting, an OSError naming the file) are reported as they are, so
no command catches and re-words them. A run stopped at its cost limit is not an error: it
ends with its own line and COST_LIMIT_STATUS, and `--resume` with a higher limit continues.
"""

from __future__ import annotations

import sys

USAGE_STATUS = 2  # argparse's status for a usage error
COST_LIMIT_STATUS = 3  # stopped at --cost-limit; the run resumes with a higher one
NO_MODEL_CALL_STATUS = 4  # every episode ended on a provider error: no model call succeeded


class UsageError(ValueError):
    """A mistake in what the user asked for, found after parsing: its message is the one
    line printed after `diagym <command>: error: `."""


def known_errors() -> tuple[type[BaseException], ...]:
    """The errors a command reports as one line: ValueError (a value found wrong late: an env
    kwarg, a log that needs --resume, an output path, a policy that does not load), TypeError
    (gym.make given a kwarg the env does not take), RuntimeError (a server that failed or
    died), OSError (a file, a connection) and, once gymnasium is imported, its errors (an
    env id nobody registered). Anything else is a bug, and keeps its traceback."""
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError, RuntimeError, OSError)
    gym_errors = sys.modules.get("gymnasium.error")
    return errors if gym_errors is None else (*errors, gym_errors.Error)


def is_cost_limit(error: BaseException) -> bool:
    """Whether `error` is the chat client's CostLimitReached (only a run that imported the
    client can raise it, so nothing is imported to ask)."""
    prices = sys.modules.get("diagym.llm_policies.client.prices")
    return prices is not None and isinstance(error, prices.CostLimitReached)

