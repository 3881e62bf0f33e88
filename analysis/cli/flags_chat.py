"""The chat-model flags (--base-url, --local, --model, decoding, limits) and the one place
chat settings are built from them, with the server checked before anything is played."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagym.analysis.cli.flags_general import (
    MAX_PRICES_BYTES,
    MAX_WINDOW_TOKENS,
    bounded_int,
    input_file,
    non_negative_float,
    positive_float,
)
from diagym.analysis.cli.outputs import writable_dir
from diagym.llm_policies.client.config import RESPONSE_FORMATS, SettingError, client_default
from diagym.llm_policies.harness import HARNESSES

if TYPE_CHECKING:
    from diagym.analysis.cli.estimate import RunPlan
    from diagym.analysis.llm_runs import ChatSettings


DEFAULT_TIMEOUT_S = client_default("timeout")
# a typical StatefulWorkflow decision prompt (docs/RESULTS.md: 800-1,100 tokens) and its answer,
# for the estimate printed before a local run
ESTIMATE_PROMPT_TOKENS = 1000
ESTIMATE_OUTPUT_TOKENS = 24
LOCAL_REJECTS = "json_schema"  # llama-cpp-python's server answers OpenAI's json_schema type 500
MAX_REASONING_TOKENS = 1_000_000


TOOL_CHOICES = ("auto", "required")  # of ClientConfig's: "none" would offer a tool never called



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
    from diagym.llm_policies.client.local_server import DEFAULT_MODEL, LOCAL_MODELS

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
        group.add_argument("--harness", choices=tuple(HARNESSES), default="json",
                           help="how the model acts: json (seed 003's protocol: a fresh "
                                "prompt per decision, one JSON text action), tools (a "
                                "conversation; the action is a native tool call, its result "
                                "a tool message) or chat (a conversation of JSON text "
                                "actions); with --budget W the conversations keep the "
                                "newest exchanges within W tokens (default: %(default)s)")
    group.add_argument("--reasoning-tokens", type=bounded_int(1, MAX_REASONING_TOKENS),
                       metavar="R",
                       help="think-then-act: the model may reason in text for up to R tokens "
                            "before its action, on top of --max-tokens (the answer's own "
                            "reserve); the last action object of a reply is its answer and a "
                            "reply cut before one is cut_reasoning. Sent as reasoning_effort "
                            "and max_completion_tokens where the probe finds a server honours "
                            "them, else as max_tokens; decoding is then unconstrained "
                            "(--response-format json_schema, json_object or auto forces a bare "
                            "JSON object and is refused). docs/REASONING.md (default: none, "
                            "seed 003's direct answer)")
    group.add_argument("--invalid-retries", type=bounded_int(0, 8), default=0, metavar="K",
                       help="after an invalid reply, tell the model its category and ask "
                            "again, up to K times, 0..8 (default: %(default)s: an invalid "
                            "reply ends the episode, as in seed 003)")
    group.add_argument("--tool-choice", choices=TOOL_CHOICES, default="auto",
                       help="OpenAI's tool_choice for --harness tools: auto (the model may "
                            "answer in text instead) or required (it must call a function; "
                            "with one function sent as that function by name, which "
                            "llama.cpp's servers take) (default: %(default)s)")
    group.add_argument("--bounded-fields", action="store_true",
                       help="give the answer's integer fields their ranges in the schema "
                            "(each an enum: operation 0..N-1, candidate 0..b-1), so a "
                            "constrained decoder cannot write one out of range (llama.cpp's "
                            "grammar ignores minimum/maximum); for constrained decoding or "
                            "--harness tools (default: off, seed 003's schema: the env "
                            "refuses an out-of-range value as invalid_action)")
    add_spending_flags(group, "run", "--resume with a higher limit continues")


def add_spending_flags(parser: Any, spent_by: str, resumed: str) -> None:
    """--prices, --cost-limit and --cache-dir, the same for every command that calls a model
    (`spent_by`: what the limit counts; `resumed`: how a stopped one goes on);
    spending_settings reads them."""
    parser.add_argument("--prices", type=input_file(MAX_PRICES_BYTES), metavar="FILE.json",
                        help="price table, USD per 1M input, cached input and output tokens "
                             "per model (default: the bundled table, which lists only the "
                             "local models)")
    parser.add_argument("--cost-limit", type=non_negative_float, metavar="USD",
                        help=f"stop before the call that could take the {spent_by}'s cost past "
                             f"USD (calls already in the log count, exit 3); {resumed} "
                             "(default: none)")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
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
                 "temperature": "--temperature", "max_tokens": "--max-tokens",
                 "reasoning_tokens": "--reasoning-tokens"}


def _preflight(check: Callable[[ChatSettings], ChatSettings],
               settings: ChatSettings) -> ChatSettings:
    """Run the pre-flight check; a setting the client refuses is reported by its flag."""
    try:
        return check(settings)
    except SettingError as error:
        if error.setting not in SETTING_FLAGS:
            raise
        raise ValueError(f"{SETTING_FLAGS[error.setting]} {error.detail}") from None


def response_format_of(args: argparse.Namespace, default: str) -> str:
    """--response-format, or `default` when not given; under --reasoning-tokens "none", and a
    format that forces a bare JSON object is refused (ValueError naming both flags): a
    think-then-act reply writes its reasoning before the object."""
    chosen = args.response_format
    if getattr(args, "reasoning_tokens", None) is None:
        return chosen or default
    if chosen not in (None, "none"):
        raise ValueError(f"--reasoning-tokens: a think-then-act reply writes its reasoning "
                         f"before its JSON object, which --response-format {chosen} forbids "
                         "(it holds the reply to a bare object); use --response-format none "
                         "or leave it out")
    return "none"


def output_tokens_of(args: argparse.Namespace) -> int:
    """The most tokens a reply may take: --max-tokens plus any --reasoning-tokens."""
    return args.max_tokens + (getattr(args, "reasoning_tokens", None) or 0)


def harnesses_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The harnesses a command plays (llm-study's --harness list, or the one --harness)."""
    harness = getattr(args, "harness", "json")
    return harness if isinstance(harness, tuple) else (harness,)


def _measured_deadlines(args: argparse.Namespace, server: Any,
                        plan: RunPlan | None = None) -> tuple[float, float]:
    """(per-call timeout, probe deadline) for a started local server: an explicit --timeout
    for both, else what the model's speed, measured now (diagym.llm_policies.client.local_speed),
    predicts; the speed and what a decision costs are printed to stderr before the run, and
    with the run's `plan` what the whole run takes (diagym.analysis.cli.estimate), so a long run's
    duration can be judged before it is spent."""
    from diagym.analysis.cli.estimate import whole_run_estimate
    from diagym.llm_policies.client.local_speed import measure

    speed = measure(server.base_url, server.model.name)
    reasoning = getattr(args, "reasoning_tokens", None) or 0
    decision_s = speed.call_seconds(ESTIMATE_PROMPT_TOKENS, ESTIMATE_OUTPUT_TOKENS + reasoning)
    call_timeout = args.timeout or speed.call_timeout(server.n_ctx, output_tokens_of(args))
    probe_timeout = args.timeout or speed.probe_timeout()
    answer = (f" and up to {ESTIMATE_OUTPUT_TOKENS + reasoning:,} output tokens (--reasoning-"
              f"tokens {reasoning} counted in full)" if reasoning else "")
    print(f"{server.model.title}: {speed.describe()}; a cold decision of "
          f"{ESTIMATE_PROMPT_TOKENS:,} prompt tokens{answer} takes about {decision_s:.0f} s (later "
          f"decisions of an episode reuse the shared prefix); per-call timeout "
          f"{call_timeout:g} s, probe deadline {probe_timeout:g} s", file=sys.stderr,
          flush=True)
    if plan is not None:
        print(whole_run_estimate(decision_s, plan, getattr(args, "invalid_retries", 0)),
              file=sys.stderr, flush=True)
    return call_timeout, probe_timeout


def spending_settings(args: argparse.Namespace) -> dict[str, Any]:
    """--prices, --cost-limit and --cache-dir as a chat client's settings take them (paths
    as text, absent flags None), for ChatSettings and dacs-live's roles alike."""
    return {"prices": str(args.prices) if getattr(args, "prices", None) else None,
            "cost_limit": getattr(args, "cost_limit", None),
            "cache_dir": str(args.cache_dir) if getattr(args, "cache_dir", None) else None}


def chat_settings(args: argparse.Namespace, served: Any = None,
                  deadlines: tuple[float, float] | None = None) -> ChatSettings:
    """The one place the chat-model flags become ChatSettings: for the server at --base-url
    serving --model, or for `served`, a started local server (diagym.llm_policies.client.
    local_server), whose model sets the defaults of --model, --response-format and the
    system role, with `deadlines` its (per-call timeout, probe deadline)."""
    from diagym.analysis.llm_runs import ChatSettings

    if served is None:
        where: dict[str, Any] = {
            "base_url": args.base_url, "model": args.model,
            "response_format": response_format_of(args, "auto"),
            "system_role": not args.no_system_role,
            "timeout": args.timeout or DEFAULT_TIMEOUT_S, "probe_timeout": args.timeout}
    else:
        local = served.model
        timeout, probe_timeout = deadlines or (args.timeout or DEFAULT_TIMEOUT_S, args.timeout)
        where = {"base_url": served.base_url, "model": args.model or local.name,
                 "response_format": response_format_of(args, local.response_format),
                 "system_role": local.system_role and not args.no_system_role,
                 "timeout": timeout, "probe_timeout": probe_timeout}
    return ChatSettings(
        **where, api_key_env=key_variable(args.api_key_env), temperature=args.temperature,
        max_tokens=args.max_tokens, seed=args.llm_seed, budget=getattr(args, "budget", None),
        harness=harnesses_of(args)[0], invalid_retries=getattr(args, "invalid_retries", 0),
        concurrency=getattr(args, "concurrency", 1), **spending_settings(args),
        reasoning_tokens=getattr(args, "reasoning_tokens", None),
        **answer_settings(args, where["response_format"]))


def key_variable(name: str) -> str:
    """--api-key-env NAME as given: a variable the user named that is unset or empty is
    refused (ValueError naming the flag) instead of sending no key without a word; the
    default's being unset is how a local server is used."""
    import os

    if name != client_default("api_key_env") and not os.environ.get(name, "").strip():
        raise ValueError(f"--api-key-env {name}: no such environment variable is set (or it "
                         "is empty); export it, or leave --api-key-env out to send no key")
    return name


def answer_settings(args: argparse.Namespace, response_format: str) -> dict[str, Any]:
    """--tool-choice and --bounded-fields as ChatSettings take them; a value that no call of
    the run would carry is refused (ValueError naming the flag), not dropped."""
    harnesses = harnesses_of(args)
    tool_choice = getattr(args, "tool_choice", "auto")
    bounded = getattr(args, "bounded_fields", False)
    if tool_choice != "auto" and "tools" not in harnesses:
        raise ValueError(f"--tool-choice {tool_choice} applies to --harness tools only; got "
                         f"--harness {','.join(harnesses)}")
    if bounded and response_format == "none" and "tools" not in harnesses:
        raise ValueError("--bounded-fields bounds the schema of constrained decoding or of "
                         "--harness tools; --response-format none sends no schema")
    return {"tool_choice": tool_choice, "bounded_fields": bounded}


@contextlib.contextmanager
def llm_endpoint(args: argparse.Namespace,
                 plan: RunPlan | None = None) -> Iterator[ChatSettings]:
    """Chat settings from the flags (`chat_settings`), with the server checked before
    anything is played (`llm_runs.preflight`, then `llm_runs.probe_server`: the capabilities
    the harnesses need); with --local, around a running local server, whose measured speed
    times `plan` (what the run plays, if known) is printed as the whole run's estimate."""
    from diagym.analysis.llm_runs import preflight, probe_server

    if getattr(args, "cache_dir", None) is not None:
        writable_dir("--cache-dir", args.cache_dir)
    if args.local:
        from diagym.llm_policies.client import local_server

        local = local_server.LOCAL_MODELS[args.local]
        response_format = response_format_of(args, local.response_format)
        if response_format == LOCAL_REJECTS:
            allowed = " | ".join(f for f in RESPONSE_FORMATS if f != LOCAL_REJECTS)
            raise ValueError(f"--response-format with --local must be one of {allowed} (the "
                             f"local llama.cpp server rejects {LOCAL_REJECTS}); got "
                             f"{response_format!r}")
        with local_server.running_server(model=args.local) as server:
            # no pre-flight: the local server is ours, keyless, and answered before this
            settings = chat_settings(args, server, _measured_deadlines(args, server, plan))
            tools = {"tools": local.tools, "notes": {} if local.tools else {
                "tools": f"{local.title}'s chat format ({local.chat_format}) never shows the "
                         "model its tools"}}
            yield probe_server(settings, harnesses_of(args), known=tools)
        return
    if not args.base_url or not args.model:
        raise ValueError("--policy llm needs --base-url URL and --model NAME (or --local)")
    # a refused key or a dead server: no episode is played
    yield _preflight(lambda s: probe_server(s, harnesses_of(args), preflight=preflight),
                     chat_settings(args))
