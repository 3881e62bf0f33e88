"""The --policy flag: which forms it takes, and the one builder of a PolicyFactory
(diagym.controllers.policy) from it, used by every command that plays a policy (run, diagnose,
llm-study, dacs-study, rcwt sweep), so a given --policy plays the same way everywhere.

The forms: a programmed policy by name (controllers/registry.py), llm (a chat model behind
--base-url), text-oracle (the harness's self-check), sb3:DIR/model.zip (a model saved by
diagym train) and a user's policy as package.module:Name or path/to/file.py:Name. A command
whose --policy takes fewer forms says so in its flag's type.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagym.analysis.cli.flags_chat import (
    harnesses_of,
    llm_endpoint,
    refuse_chat_flags,
    refuse_served_flags,
)

if TYPE_CHECKING:
    from diagym.analysis.cli.estimate import RunPlan
    from diagym.analysis.llm_runs import ChatSettings
    from diagym.controllers.policy import PolicyFactory

TEXT_ORACLE = "text-oracle"  # the harness's self-check (analysis.llm_runs.oracle_policy_factory)


def policy_names() -> str:
    """The programmed policies' names, for a --policy help (as a HelpValue)."""
    from diagym.controllers.policy_names import POLICY_NAMES

    return ", ".join(POLICY_NAMES)


def policy_name(text: str) -> str:
    """argparse type for --policy: a programmed policy, llm, text-oracle, sb3:PATH or an
    import spec (loaded later, so an import error is one line from the command). A value
    that is none of them names the closest policy, or the `:Name` a file or module lacks."""
    import difflib

    from diagym.controllers.loading import FORMS, is_import_path
    from diagym.controllers.policy_names import POLICY_NAMES

    names = (*POLICY_NAMES, "llm", TEXT_ORACLE)
    if text in names or text.startswith("sb3:") or is_import_path(text):
        return text
    if text.endswith(".py") or "/" in text or "." in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no policy inside it: add the class or function after a colon, "
            f"as {text}:Name")
    close = difflib.get_close_matches(text, names, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(
        f"got {text!r}; {hint}it must be one of {', '.join(names)}, sb3:DIR/model.zip or "
        f"your own policy as {FORMS}")


@dataclass(frozen=True)
class BuiltPolicy:
    """What a command plays for its --policy: the factory; whether it is a chat model's or
    the text oracle's (each env a worker's); and, for a chat model, its settings and what a
    run describes itself by."""

    factory: PolicyFactory
    chat: bool = False
    settings: ChatSettings | None = None
    described: dict[str, Any] = field(default_factory=dict)

    @property
    def text_actions(self) -> bool:
        """The policy answers in text: it plays its env behind the text-action wrapper."""
        return self.factory.text_actions


@contextlib.contextmanager
def build_policy(args: argparse.Namespace, env_id: str,
                 env_kwargs: dict[str, Any] | None = None,
                 log: Path | None = None,
                 plan: RunPlan | None = None) -> Iterator[BuiltPolicy]:
    """The BuiltPolicy of args.policy on `env_id` (a chat model's endpoint is open while the
    context is); `env_kwargs` are the kwargs the user gave, named when an sb3 model does not
    fit (default: the env's own); `log` holds what a resumed chat run already paid (default
    --log); `plan`, what the run plays, for a local model's whole-run estimate. Refuses the
    flags the form does not use (ValueError)."""
    from diagym.controllers.policy import FunctionFactory

    policy = args.policy
    if getattr(args, "trust_model", False) and not policy.startswith("sb3:"):
        raise ValueError(f"--trust-model loads sb3:PATH models; --policy {policy} has none")
    if policy == TEXT_ORACLE:
        from diagym.analysis.llm_runs import OraclePolicyFactory

        refuse_served_flags(args, TEXT_ORACLE)
        yield BuiltPolicy(OraclePolicyFactory(budget=getattr(args, "budget", None),
                                              system_role=not args.no_system_role,
                                              harness=harnesses_of(args)[0],
                                              invalid_retries=args.invalid_retries,
                                              reasoning_tokens=getattr(args, "reasoning_tokens",
                                                                       None)),
                          chat=True)
        return
    if policy == "llm":
        from diagym.analysis.llm_runs import ChatPolicyFactory, spent_in_log

        with llm_endpoint(args, plan) as settings:
            capabilities = settings.capabilities or {}
            described = {
                "model": settings.model, "probed_model": capabilities.get("served_model"),
                "harness": settings.harness, "response_format": settings.response_format,
                "temperature": settings.temperature, "llm_seed": settings.seed,
                "invalid_retries": settings.invalid_retries, "capabilities": capabilities}
            spent = spent_in_log(getattr(args, "log", None) if log is None else log)
            yield BuiltPolicy(ChatPolicyFactory(settings, spent_usd=spent), chat=True,
                              settings=settings, described=described)
        return
    refuse_chat_flags(args, policy)
    from diagym.controllers.loading import is_import_path, load_policy_factory

    if is_import_path(policy):
        yield BuiltPolicy(load_policy_factory(policy))
    elif policy.startswith("sb3:"):
        from diagym.controllers.sb3.policy import SB3Policy, small_network_threads

        path = policy[len("sb3:"):]

        def make_sb3(env: Any) -> Any:
            small_network_threads()  # in each worker process too
            kwargs = dict(env.unwrapped.spec.kwargs) if env_kwargs is None else env_kwargs
            check_model_env(path, env_id, kwargs, env)
            return SB3Policy.load(path, trust=args.trust_model)

        yield BuiltPolicy(FunctionFactory(make_sb3))
    else:
        def make_programmed(env: Any) -> Any:
            from diagym.controllers.registry import make_reference_policy

            return make_reference_policy(policy, env)

        yield BuiltPolicy(FunctionFactory(make_programmed))


def trained_env_of(path: str) -> tuple[str, dict[str, Any]]:
    """(env id, env kwargs) the sb3 model at `path` was trained on, from the config.json
    diagym train writes beside it; ValueError, one line, when it is missing or not one."""
    import gymnasium as gym

    from diagym.controllers.sb3.policy import CONFIG_NAME

    where = Path(path)
    directory = where.parent if where.suffix == ".zip" else where
    config_path = directory / CONFIG_NAME
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        trained_id, trained_kwargs = str(config["env"]), dict(config["env_kwargs"])
    except FileNotFoundError:
        raise ValueError(f"--policy sb3:{path}: no {config_path} beside the model; pass a "
                         "DIR/model.zip written by diagym train") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"--policy sb3:{path}: {config_path} is not a diagym train config "
                         f"({type(error).__name__}: {error})") from None
    if ":" in trained_id or trained_id not in gym.registry:  # "module:Env" would import
        raise ValueError(f"--policy sb3:{path}: {config_path} names {trained_id!r}, not a "
                         "registered env id")
    return trained_id, trained_kwargs


def check_model_env(path: str, env_id: str, env_kwargs: dict[str, Any], env: Any) -> None:
    """ValueError unless the model at `path` was trained (config.json beside it) on an env with
    the observation and action spaces of `env`: SB3 would otherwise fail with a reshape or
    attribute error at the first step. Equal spaces, not equal kwargs, decide, so a model can
    be evaluated under another feedback mode of the same size."""
    import gymnasium as gym

    trained_id, trained_kwargs = trained_env_of(path)
    trained_env = gym.make(trained_id, **trained_kwargs)
    same = (trained_env.observation_space == env.observation_space
            and trained_env.action_space == env.action_space)
    trained_env.close()
    if not same:
        raise ValueError(
            f"--policy sb3:{path} was trained on {trained_id} {json.dumps(trained_kwargs)}, "
            f"whose observations and actions differ in size from --env {env_id} "
            f"--env-kwargs {json.dumps(env_kwargs)}; evaluate it on an env of its size")
