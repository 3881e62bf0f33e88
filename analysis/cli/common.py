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
import math
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_policies.client.config import RESPONSE_FORMATS, client_default

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


def positive_float(text: str) -> float:
    """An argparse type for a finite number > 0 (--timeout: 0 or less cannot answer)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type for a finite number >= 0 (--temperature)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text!r}")
    return value


MAX_WINDOW_TOKENS = 10_000_000  # a token budget beyond any model's context: a typo
MAX_EPISODES = 10**9  # episodes one command plays: beyond it, counts overflow int64 sums
MAX_PRICES_BYTES = 1 << 20  # a price table is a few kB
MAX_CSV_BYTES = 256 << 20  # a sweep's CSV: far more rows than any sweep writes
MAX_JSON_FLAG_DEPTH = 32  # kwargs are flat; deeper input is a typo or an attack on the parser


def _json_depth(text: str) -> int:
    """The deepest bracket nesting outside strings, without parsing (json.loads recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def json_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs and --hyperparameters: a JSON object."""
    if _json_depth(text) > MAX_JSON_FLAG_DEPTH:
        raise argparse.ArgumentTypeError(
            f"must be a JSON object nested at most {MAX_JSON_FLAG_DEPTH} levels deep; got "
            f"{_json_depth(text)} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r}")
    return value


def env_kwargs_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs: a JSON object whose render_mode, when given, is a
    name or null (gym.make calls string methods on it before the env can refuse it)."""
    value = json_object(text)
    mode = value.get("render_mode")
    if mode is not None and not isinstance(mode, str):
        raise argparse.ArgumentTypeError(
            f"render_mode must be a name (\"ansi\", \"rgb_array\") or null; got {json.dumps(mode)}")
    return value


def input_file(max_bytes: int) -> Callable[[str], Path]:
    """An argparse type for a file to read whole: a regular file (a device such as /dev/zero
    or a pipe never ends) of at most `max_bytes`."""
    def parse(text: str) -> Path:
        path = Path(text)
        if not path.exists():
            raise argparse.ArgumentTypeError(f"no such file: {text}")
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"must be a regular file; {text} is not one")
        size = path.stat().st_size
        if size > max_bytes:
            raise argparse.ArgumentTypeError(
                f"must be at most {max_bytes:,} bytes; {text} has {size:,}")
        return path

    return parse


class OutputError(ValueError):
    """An output path that cannot be written; raised before any work starts."""


def _probe(flag: str, path: Path, directory: Path) -> None:
    """Create and remove a file in `directory`: permission bits say nothing to root, a
    read-only mount or a full quota, so only a real write answers."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".diagym-probe-"):
            pass
    except OSError as error:
        where = "" if directory == path else f" in {directory}"
        raise OutputError(f"{flag} {path}: cannot write{where} ({error.strerror or error})"
                          ) from None


def _existing_ancestor(flag: str, path: Path, levels: int = 1) -> Path:
    """The directory `path` is written in, which must exist, or be the one directory to
    create (levels 2: a file's own directory) in one that does: a typo in a path's head
    (`/nonexistent/...`) is an error, not a tree of directories made anywhere."""
    ancestor = path.parent
    for _ in range(levels):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise OutputError(f"{flag} {path}: {ancestor} is a file, not a directory")
            return ancestor
        ancestor = ancestor.parent
    raise OutputError(f"{flag} {path}: {path.parent if levels == 1 else path.parent.parent} "
                      "does not exist (only the last directory of a path is created)")


def writable_dir(flag: str, path: Path) -> Path:
    """Check that `path` is, or can become, a directory this process can write, and create
    it (only it: its parent must exist), so a long command fails in its first second rather
    than after its work."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{flag} {path}: is a file; {flag} needs a directory")
    if not path.exists():
        _probe(flag, path, _existing_ancestor(flag, path))
        try:
            path.mkdir(exist_ok=True)
        except OSError as error:
            raise OutputError(f"{flag} {path}: cannot create the directory "
                              f"({error.strerror or error})") from None
    _probe(flag, path, path)
    return path


def writable_file(flag: str, path: Path | None) -> Path | None:
    """Check that `path` (None: no file) is a file that can be appended to or created; the
    file itself is not created, so the resume rule still sees whether a log exists."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{flag} {path}: is a directory; {flag} needs a file")
    if path.exists() and not path.is_file():  # /dev/full, a pipe: reading it never ends
        raise OutputError(f"{flag} {path}: is not a regular file; {flag} needs one")
    if path.exists():
        try:
            with path.open("ab"):  # appends nothing: the file is unchanged
                pass
        except OSError as error:
            raise OutputError(f"{flag} {path}: cannot append to the file "
                              f"({error.strerror or error})") from None
        return path
    _probe(flag, path, _existing_ancestor(flag, path, levels=2))
    return path


def add_env_kwargs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-kwargs", type=env_kwargs_object, default={}, metavar="JSON",
                        help="keyword arguments for gym.make, as a JSON object (default: "
                             "%(default)s, the registered configuration)")


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
                        help=f"append-only run log ({what}; default: none, nothing is logged)")
    parser.add_argument("--resume", action="store_true",
                        help="continue --log: skip finished episodes, rerun unfinished ones; "
                             "refused when the log recorded other settings for the run "
                             "(default: off)")
    if not run_flags:
        return
    parser.add_argument("--run-name", type=run_name, metavar="NAME",
                        help="name the run in --log yourself (default: the run is named by "
                             "what it measures: env, kwargs, policy, model and harness "
                             "settings, never the base URL, port or concurrency); a new name "
                             "starts another run in the same log")
    parser.add_argument("--retry-failed", action=_RetryFailed, nargs=0, default=False,
                        help="continue --log (implies --resume) and play again the episodes "
                             "whose first failure is provider_error; the others stay "
                             "(default: off)")


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    """--executor local|ray and --ray-address (controllers.executors): where the command's
    independent units play. Checked by `open_executor` before anything slow starts."""
    from controllers.executors import EXECUTORS

    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="where units play: local (threads of this process) or ray (tasks "
                             "on a Ray instance: the [ray] extra; see docs/SCALING.md) "
                             "(default: %(default)s)")
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="with --executor ray: auto or host:port joins a running cluster "
                             "(default: start a local Ray instance for this run)")


def check_executor_flags(args: argparse.Namespace) -> None:
    """ValueError (one line naming the flag) for --ray-address without --executor ray, and
    for --executor ray where Ray is not installed."""
    from controllers.executors import RAY_INSTALL

    executor = getattr(args, "executor", "local")
    if getattr(args, "ray_address", None) is not None and executor != "ray":
        raise ValueError("--ray-address joins a Ray cluster: it needs --executor ray")
    if executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ValueError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL}")


def executor_workers(args: argparse.Namespace, chat: bool) -> int | None:
    """Units in flight: --concurrency for a chat model (its calls in flight, one limit for
    the cluster) and for any policy locally (threads); for a programmed policy on Ray, None:
    one per CPU of the cluster."""
    return args.concurrency if chat or getattr(args, "executor", "local") == "local" else None


def for_executor(make_policy: Any, executor: Any) -> Any:
    """The policy factory with its shared limits held by `executor` (a chat model's one rate
    limit and cost meter for every worker), where the factory has any; else as it is."""
    share = getattr(make_policy, "for_executor", None)
    return share(executor) if callable(share) else make_policy


@contextlib.contextmanager
def open_executor(args: argparse.Namespace, workers: int | None = None) -> Iterator[Any]:
    """The executor of --executor / --ray-address with `workers` units in flight (ray, None:
    one per CPU of the cluster), closed (a local Ray instance shut down) on exit."""
    from controllers.executors import make_executor

    check_executor_flags(args)
    name = getattr(args, "executor", "local")
    if name == "local":
        workers = 1 if workers is None else workers
    with make_executor(name, getattr(args, "ray_address", None), workers) as executor:
        yield executor


COST_LIMIT_STATUS = 3  # stopped at --cost-limit; the run resumes with a higher one


@contextlib.contextmanager
def json_stdout(wanted: bool) -> Iterator[Any]:
    """The stream a command's --json output goes to, with stdout carrying nothing else:
    while the command runs, file descriptor 1 points at stderr, so what a library prints
    (Ray's notices and its workers' output, forwarded to the driver's stdout) and what a
    child process started meanwhile writes go there; the JSON goes to the real stdout.
    Without --json, stdout as it is."""
    if not wanted:
        yield sys.stdout
        return
    import os

    try:
        on_fd_1 = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        on_fd_1 = False  # sys.stdout replaced (a caller capturing it): the JSON goes there
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        if not on_fd_1:
            yield sys.stdout
            return
        with open(os.dup(kept), "w", encoding="utf-8") as real:
            yield real
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)


def with_json_stdout(command: Callable[[argparse.Namespace], int]
                     ) -> Callable[[argparse.Namespace], int]:
    """`command` run inside `json_stdout(args.json)`, its JSON printed to `args.stdout`."""
    import functools

    @functools.wraps(command)
    def wrapped(args: argparse.Namespace) -> int:
        with json_stdout(args.json) as out:
            args.stdout = JsonStream(out)
            return command(args)

    return wrapped


def _stderr_stream() -> JsonStream:
    return JsonStream(sys.stderr)


class JsonStream:
    """The --json stream on `args`, which factories built from `args` carry to Ray's workers:
    an open file cannot be pickled, so a copy unpickled elsewhere writes to that process's
    stderr (a worker prints no JSON)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _stderr_stream, ()


def stopped_at_cost_limit(command: str, reached: BaseException) -> int:
    """Print the cost limit's one line (what was spent, how to continue) for `diagym
    <command>` and return COST_LIMIT_STATUS."""
    print(f"diagym {command}: {reached}", file=sys.stderr)
    return COST_LIMIT_STATUS


def shown(text: str) -> str:
    """`text` safe to print on a terminal, on one line: control characters (a server's
    escape codes, newlines) escaped as \\x1b, \\n, ... instead of acted on."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def fail(command: str, error: BaseException | str) -> int:
    """Print one error line for `diagym <command>` and return the usage-error status 2; what
    the line quotes from elsewhere (a server's message) cannot drive the terminal."""
    print(f"diagym {command}: error: {shown(str(error))}", file=sys.stderr)
    return 2


DEFAULT_TIMEOUT_S = client_default("timeout")
# a typical StatefulWorkflow decision prompt (docs/RESULTS.md: 800-1,100 tokens) and its answer,
# for the estimate printed before a local run
ESTIMATE_PROMPT_TOKENS = 1000
ESTIMATE_OUTPUT_TOKENS = 24
LOCAL_REJECTS = "json_schema"  # llama-cpp-python's server answers OpenAI's json_schema type 500


HARNESSES = ("json", "tools", "chat")  # llm_policies.harness.HARNESSES



def harness_list(text: str) -> tuple[str, ...]:
    """argparse type for llm-study's --harness: a comma list of harnesses, each once."""
    names = tuple(part.strip() for part in text.split(","))
    bad = [name for name in names if name not in HARNESSES]
    if bad or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"must be a comma list of distinct harnesses from {', '.join(HARNESSES)}; "
            f"got {text!r}")
    return names


def add_llm_flags(parser: argparse.ArgumentParser, budget: bool = True,
                  policy: bool = True, harnesses: bool = False) -> None:
    """Flags of a chat model policy (--policy llm, llm-study, dacs-study, rcwt sweep); without
    `budget` no --budget, for commands that set the prompt size themselves (rcwt sweep's
    --window), so the flag is refused there instead of silently ignored. Without `policy`
    no harness, retry, cost or cache flags (rcwt sweep calls the model itself); with
    `harnesses`, --harness takes a comma list (llm-study's factor)."""
    group = parser.add_argument_group("chat model (--policy llm)")
    group.add_argument("--base-url", metavar="URL",
                       help="OpenAI-compatible API root ending in /v1, e.g. "
                            "http://127.0.0.1:8080/v1 (llama.cpp, vLLM, Ollama, OpenAI); "
                            "checked with one request before the run (default: none; "
                            "required unless --local)")
    from llm_policies.client.local_server import DEFAULT_MODEL, LOCAL_MODELS

    group.add_argument("--local", nargs="?", const=DEFAULT_MODEL, choices=tuple(LOCAL_MODELS),
                       default=None, metavar="MODEL",
                       help="start a bundled model's llama.cpp server on 127.0.0.1 and use "
                            "it: gemma (Gemma 3 270M, the default of a bare --local), "
                            "smollm2 (SmolLM2-135M-Instruct), qwen0.5b or qwen1.5b "
                            "(Qwen2.5-Coder Instruct, fetched on first use); all but gemma "
                            "ChatML with native tool calls (default: off)")
    group.add_argument("--model", metavar="NAME",
                       help="model name sent to the server (default: none; required unless "
                            "--local, which names its own model)")
    group.add_argument("--api-key-env", default=client_default("api_key_env"), metavar="NAME",
                       help="environment variable holding the API key, never logged "
                            "(default: %(default)s; unset: no key is sent)")
    group.add_argument("--concurrency", type=bounded_int(1), default=1, metavar="K",
                       help="episodes (or calls) in flight at once (default: %(default)s)")
    if budget:
        group.add_argument("--budget", type=bounded_int(1, MAX_WINDOW_TOKENS), metavar="W",
                           help="assemble every prompt to exactly W cl100k_base tokens (RCWT; "
                                "default: none, prompts as rendered)")
    group.add_argument("--max-tokens", type=bounded_int(1), default=client_default("max_tokens"),
                       metavar="T",
                       help="most tokens the model may answer per call (default: %(default)s)")
    group.add_argument("--temperature", type=non_negative_float,
                       default=client_default("temperature"), metavar="X",
                       help="sampling temperature, >= 0 (default: %(default)s, greedy)")
    group.add_argument("--llm-seed", type=bounded_int(0), metavar="S",
                       help="sampling seed sent to the server (default: none, not sent)")
    group.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                       help="wall-clock seconds for one attempt of one call, > 0 (default: "
                            f"{DEFAULT_TIMEOUT_S:g}; with --local the model's measured "
                            "per-call timeout)")
    group.add_argument("--response-format", choices=RESPONSE_FORMATS, default=None,
                       help="decoding: json_schema or json_object (constrained: the server "
                            "holds the answer to the action schema), none (unconstrained: "
                            "free text, judged by the parser alone), auto (negotiate from "
                            "json_schema down); default auto, json_object with --local")
    group.add_argument("--no-system-role", action="store_true",
                       help="put the rules in the user turn, for chat formats without a "
                            "system role (default: off)")
    if not policy:
        return
    if harnesses:
        group.add_argument("--harness", type=harness_list, default=("json",),
                           metavar="LIST",
                           help="harnesses to compare, a comma list of "
                                + ", ".join(HARNESSES) + ": every cell is played in each, on "
                                "the same tasks and seeds (default: json)")
    else:
        group.add_argument("--harness", choices=HARNESSES, default="json",
                           help="how the model acts: json (seed 003's protocol: a fresh "
                                "prompt per decision, one JSON text action), tools (a "
                                "conversation; the action is a native tool call, its result "
                                "a tool message) or chat (a conversation of JSON text "
                                "actions); with --budget W the conversations keep the "
                                "newest exchanges within W tokens (default: %(default)s)")
    group.add_argument("--invalid-retries", type=bounded_int(0, 8), default=0, metavar="K",
                       help="after an invalid reply, tell the model its category and ask "
                            "again, up to K times, 0..8 (default: %(default)s: an invalid "
                            "reply ends the episode, as in seed 003)")
    group.add_argument("--prices", type=input_file(MAX_PRICES_BYTES), metavar="FILE.json",
                       help="price table, USD per 1M input, cached input and output tokens "
                            "per model (default: the bundled table, which lists only the "
                            "local models)")
    group.add_argument("--cost-limit", type=non_negative_float, metavar="USD",
                       help="stop before the call that could take the run's cost past USD "
                            "(calls already in the log count); --resume with a higher limit "
                            "continues (default: none)")
    group.add_argument("--cache-dir", type=Path, metavar="DIR",
                       help="reuse answers to identical requests from DIR (model, messages, "
                            "tools, decoding, temperature, seed, max tokens), and store new "
                            "ones; a cached answer makes no server call (default: none)")


def chat_flags_given(args: argparse.Namespace) -> list[str]:
    """The chat-model flags (add_llm_flags) given with a value other than their default."""
    defaults = argparse.ArgumentParser()
    add_llm_flags(defaults)
    if isinstance(getattr(args, "harness", None), tuple):
        defaults.set_defaults(harness=("json",))
    given = []
    for action in defaults._actions:
        if action.option_strings and action.dest != "help" and hasattr(args, action.dest):
            if getattr(args, action.dest) != action.default:
                given.append(action.option_strings[0])
    return given


def refuse_chat_flags(args: argparse.Namespace, policy: str) -> None:
    """ValueError naming the chat-model flags given to a run that has no chat model: a flag
    the command would ignore is a mistake to report, not to drop."""
    given = chat_flags_given(args)
    if given:
        what, them = ("is a chat-model flag", "it") if len(given) == 1 else (
            "are chat-model flags", "them")
        raise ValueError(f"{', '.join(given)} {what}; --policy {policy} does not use {them} "
                         "(only --policy llm does)")


def refuse_served_flags(args: argparse.Namespace, policy: str) -> None:
    """ValueError naming the flags that pick a server (--base-url, --local, --model), for a
    policy that answers in this process (text-oracle)."""
    served = [flag for flag, value in (("--base-url", args.base_url), ("--local", args.local),
                                       ("--model", args.model)) if value]
    if served:
        raise ValueError(f"--policy {policy} answers in this process; it takes no "
                         + ", ".join(served))


SETTING_FLAGS = {"base_url": "--base-url", "model": "--model", "timeout": "--timeout",
                 "temperature": "--temperature", "max_tokens": "--max-tokens"}


def _preflight(check: Callable[[ChatSettings], ChatSettings],
               settings: ChatSettings) -> ChatSettings:
    """Run the pre-flight check; a setting the client refuses is reported by its flag."""
    try:
        return check(settings)
    except ValueError as error:
        text = str(error)
        name = text.split(" ", 1)[0]
        raise ValueError(SETTING_FLAGS[name] + text[len(name):] if name in SETTING_FLAGS
                         else text) from None


def _settings_shared(args: argparse.Namespace) -> dict[str, Any]:
    """ChatSettings fields the flags set the same way for a local or a remote server."""
    harness = getattr(args, "harness", "json")
    return {"api_key_env": args.api_key_env, "temperature": args.temperature,
            "max_tokens": args.max_tokens, "seed": args.llm_seed,
            "budget": getattr(args, "budget", None),
            "harness": harness[0] if isinstance(harness, tuple) else harness,
            "invalid_retries": getattr(args, "invalid_retries", 0),
            "concurrency": getattr(args, "concurrency", 1),
            "prices": str(args.prices) if getattr(args, "prices", None) else None,
            "cost_limit": getattr(args, "cost_limit", None),
            "cache_dir": str(args.cache_dir) if getattr(args, "cache_dir", None) else None}


def harnesses_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The harnesses a command plays (llm-study's --harness list, or the one --harness)."""
    harness = getattr(args, "harness", "json")
    return harness if isinstance(harness, tuple) else (harness,)


def _measured_deadlines(args: argparse.Namespace, server: Any) -> tuple[float, float]:
    """(per-call timeout, probe deadline) for a started local server: an explicit --timeout
    for both, else what the model's speed, measured now (llm_policies.client.local_speed),
    predicts; the speed and what a decision costs are printed to stderr before the run, so a
    long run's duration can be judged before it is spent."""
    from llm_policies.client.local_speed import measure

    speed = measure(server.base_url, server.model.name)
    decision_s = speed.call_seconds(ESTIMATE_PROMPT_TOKENS, ESTIMATE_OUTPUT_TOKENS)
    call_timeout = args.timeout or speed.call_timeout(server.n_ctx, args.max_tokens)
    probe_timeout = args.timeout or speed.probe_timeout()
    print(f"{server.model.title}: {speed.describe()}; a cold decision of "
          f"{ESTIMATE_PROMPT_TOKENS:,} prompt tokens takes about {decision_s:.0f} s (later "
          f"decisions of an episode reuse the shared prefix); per-call timeout "
          f"{call_timeout:g} s, probe deadline {probe_timeout:g} s", file=sys.stderr,
          flush=True)
    return call_timeout, probe_timeout


@contextlib.contextmanager
def llm_endpoint(args: argparse.Namespace) -> Iterator[ChatSettings]:
    """Chat settings from the flags, with the server checked before anything is played
    (`llm_runs.preflight`, then `llm_runs.probe_server`: the capabilities the harnesses
    need); with --local, around a running local server."""
    from analysis.llm_runs import ChatSettings, preflight, probe_server

    shared = _settings_shared(args)
    if getattr(args, "cache_dir", None) is not None:
        writable_dir("--cache-dir", args.cache_dir)
    if args.local:
        from llm_policies.client import local_server

        local = local_server.LOCAL_MODELS[args.local]
        response_format = args.response_format or local.response_format
        if response_format == LOCAL_REJECTS:
            allowed = " | ".join(f for f in RESPONSE_FORMATS if f != LOCAL_REJECTS)
            raise ValueError(f"--response-format with --local must be one of {allowed} (the "
                             f"local llama.cpp server rejects {LOCAL_REJECTS}); got "
                             f"{response_format!r}")
        with local_server.running_server(model=args.local) as server:
            # no pre-flight: the local server is ours, keyless, and answered before this
            timeout, probe_timeout = _measured_deadlines(args, server)
            settings = ChatSettings(base_url=server.base_url, model=args.model or local.name,
                                    response_format=response_format,
                                    system_role=local.system_role and not args.no_system_role,
                                    timeout=timeout, probe_timeout=probe_timeout, **shared)
            tools = {"tools": local.tools, "notes": {} if local.tools else {
                "tools": f"{local.title}'s chat format ({local.chat_format}) never shows the "
                         "model its tools"}}
            yield probe_server(settings, harnesses_of(args), known=tools)
        return
    if not args.base_url or not args.model:
        raise ValueError("--policy llm needs --base-url URL and --model NAME (or --local)")
    settings = ChatSettings(base_url=args.base_url, model=args.model,
                            response_format=args.response_format or "auto",
                            system_role=not args.no_system_role,
                            timeout=args.timeout or DEFAULT_TIMEOUT_S,
                            probe_timeout=args.timeout, **shared)
    # a refused key or a dead server: no episode is played
    yield _preflight(lambda s: probe_server(s, harnesses_of(args), preflight=preflight),
                     settings)
