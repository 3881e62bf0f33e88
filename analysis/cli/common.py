"""What several commands share: argparse types, the chat-model flag group and endpoint, and
the one way a command reports a user error.

Flags are validated by argparse types, so a bad value exits with status 2 and a message
naming the flag and what is allowed before anything is built; errors found later (a bad env
kwarg, a log that needs --resume) are printed as one `diagym <command>: error: ...` line by
`fail`, also with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis.llm_runs import ChatSettings


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type for integers in low..high (high None: no upper bound)."""
    allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {value}")
        return value

    return parse


def json_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs and --hyperparameters: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r}")
    return value


def add_env_kwargs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-kwargs", type=json_object, default={}, metavar="JSON",
                        help="keyword arguments for gym.make, as a JSON object")


class _RetryFailed(argparse.Action):
    """--retry-failed continues the log, so it sets --resume too."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.retry_failed = True
        namespace.resume = True


def run_name(text: str) -> str:
    """argparse type for --run-name: a name with something in it."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a non-empty name; got {text!r}")
    return text


def add_log_flags(parser: argparse.ArgumentParser, what: str, run_flags: bool = False) -> None:
    """--log FILE.jsonl and --resume (the RunLog of controllers.runlog); with run_flags, also
    --run-name and --retry-failed (for commands that pass them to the runner)."""
    parser.add_argument("--log", type=Path, metavar="FILE.jsonl",
                        help=f"append-only run log ({what})")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones; "
                             "refused when the log recorded other settings for the run")
    if not run_flags:
        return
    parser.add_argument("--run-name", type=run_name, metavar="NAME",
                        help="name the run in --log yourself (default: the run is named by "
                             "what it measures: env, kwargs, policy, model and harness "
                             "settings, never the base URL, port or concurrency); a new name "
                             "starts another run in the same log")
    parser.add_argument("--retry-failed", action=_RetryFailed, nargs=0, default=False,
                        help="continue --log (implies --resume) and play again the episodes "
                             "whose first failure is provider_error; the others stay")


def fail(command: str, error: BaseException | str) -> int:
    """Print one error line for `diagym <command>` and return the usage-error status 2."""
    print(f"diagym {command}: error: {error}", file=sys.stderr)
    return 2


RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")  # transport.RESPONSE_FORMATS
LOCAL_REJECTS = "json_schema"  # llama-cpp-python's server answers OpenAI's json_schema type 500


def add_llm_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of a chat model policy (--policy llm, llm-study, dacs-study, rcwt sweep)."""
    group = parser.add_argument_group("chat model (--policy llm)")
    group.add_argument("--base-url", metavar="URL",
                       help="OpenAI-compatible API root ending in /v1, e.g. "
                            "http://127.0.0.1:8080/v1 (llama.cpp, vLLM, Ollama, OpenAI)")
    group.add_argument("--local", action="store_true",
                       help="start the bundled Gemma 3 270M llama.cpp server and use it")
    group.add_argument("--model", metavar="NAME", help="model name sent to the server")
    group.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                       help="environment variable holding the API key (never logged)")
    group.add_argument("--concurrency", type=bounded_int(1), default=1, metavar="K",
                       help="episodes in flight at once")
    group.add_argument("--budget", type=bounded_int(1), metavar="W",
                       help="assemble every prompt to exactly W cl100k_base tokens (RCWT)")
    group.add_argument("--max-tokens", type=bounded_int(1), default=64, metavar="T")
    group.add_argument("--temperature", type=float, default=0.0)
    group.add_argument("--llm-seed", type=bounded_int(0), metavar="S",
                       help="sampling seed sent to the server")
    group.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS")
    group.add_argument("--response-format", choices=RESPONSE_FORMATS, default=None,
                       help="decoding: json_schema or json_object (constrained: the server "
                            "holds the answer to the action schema), none (unconstrained: "
                            "free text, judged by the parser alone), auto (negotiate from "
                            "json_schema down); default auto, json_object with --local")
    group.add_argument("--no-system-role", action="store_true",
                       help="put the rules in the user turn (chat formats without a system role)")


@contextlib.contextmanager
def llm_endpoint(args: argparse.Namespace) -> Iterator[ChatSettings]:
    """Chat settings from the flags; with --local, around a running local server."""
    from analysis.llm_runs import ChatSettings  # deferred: only chat-model runs need a client

    shared = {"api_key_env": args.api_key_env, "timeout": args.timeout,
              "temperature": args.temperature, "max_tokens": args.max_tokens,
              "seed": args.llm_seed, "budget": args.budget}
    if args.local:
        from llm_policies.client import local_server

        response_format = args.response_format or local_server.RESPONSE_FORMAT
        if response_format == LOCAL_REJECTS:
            allowed = " | ".join(f for f in RESPONSE_FORMATS if f != LOCAL_REJECTS)
            raise ValueError(f"--response-format with --local must be one of {allowed} (the "
                             f"local llama.cpp server rejects {LOCAL_REJECTS}); got "
                             f"{response_format!r}")
        with local_server.local_server() as base_url:
            yield ChatSettings(base_url=base_url, model=args.model or "gemma-3-270m",
                               response_format=response_format,
                               system_role=local_server.SYSTEM_ROLE, **shared)
        return
    if not args.base_url or not args.model:
        raise ValueError("--policy llm needs --base-url URL and --model NAME (or --local)")
    yield ChatSettings(base_url=args.base_url, model=args.model,
                       response_format=args.response_format or "auto",
                       system_role=not args.no_system_role, **shared)
