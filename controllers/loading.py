"""A user's own policy from an import spec, for `--policy package.module:Name` and
`--policy path/to/file.py:Name`: any agent plays through the one runner without being
registered anywhere.

Name (dotted for a nested class: Outer.Inner) is a class or any callable that makes a policy:
it is called with the env when it has exactly one required positional parameter (a class
through its __init__), else with nothing, once per env, so each of a runner's workers gets a
policy of its own. Whatever it makes is checked against the Policy protocol at once, so a
wrong object is refused in one line naming the spec and what it lacks, not by a traceback at
the first step.

While the code is imported, the directory that holds it is first on sys.path, as
`python path/to/file.py` and `python -m package.module` put it: a file's directory (its
sibling modules import as they would in a script), the current directory for a module. It is
removed afterwards, so sys.path is as it was; modules imported then stay imported, and a
sibling module imported only later, inside act, is found only if it is on sys.path anyway.

A loaded policy plays as an ImportedPolicy, the user's object under its spec: a run log names
a run by its policy's describe(), and two classes of one name in two modules must be two runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
import reprlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from diagym.controllers.policy import Policy
from diagym.envs._core.packages import LAYERS, PACKAGE

FORMS = "package.module:Name or path/to/file.py:Name"
PROTOCOL = "a policy needs reset(*, seed=None) and act(observation, info)"
_SERIAL = itertools.count()  # a file's module name is unique: two files may share a stem


class PolicyLoadError(ValueError):
    """A spec that does not give a policy: its one line names the spec and what is wrong."""


def is_import_path(text: str) -> bool:
    """Whether a --policy value is an import spec rather than a registered name or sb3:PATH."""
    return ":" in text and not text.startswith("sb3:")


def _one_line(error: BaseException) -> str:
    message = " ".join(str(error).split())
    line = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return line + _renamed_hint(error)


def _renamed_hint(error: BaseException) -> str:
    """For an import of diagym's code by a name it had before it moved under `diagym`
    (`from controllers.policy import Policy`): what to write, and which module of that name,
    if any, was found instead (a folder of the user's, another package)."""
    name = getattr(error, "name", None) if isinstance(error, ImportError) else None
    top = (name or "").partition(".")[0]
    if top not in LAYERS:
        return ""
    found = sys.modules.get(top)
    where = getattr(found, "__file__", None) or (list(getattr(found, "__path__", [])) or [None])[0]
    instead = f"; the {top!r} imported is {where}, not diagym's" if where else ""
    return (f" (diagym's {top} is now {PACKAGE}.{top}: write `from {PACKAGE}.{top}.x import y` "
            f"for `from {top}.x import y`{instead})")


def _bare(signature: inspect.Signature) -> str:
    """A signature as its parameter names: "(env, model)", not the annotations' strings."""
    return str(signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty))


@contextlib.contextmanager
def _first_on_path(directory: Path) -> Iterator[None]:
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path.remove(entry)


def _import_file(spec: str, where: str) -> ModuleType:
    path = Path(where)
    if not where.endswith(".py"):
        raise PolicyLoadError(f"--policy {spec}: {where} is not a .py file; give {FORMS}")
    if not path.is_file():
        raise PolicyLoadError(f"--policy {spec}: no file {where} (a path is relative to the "
                              f"current directory, {Path.cwd()})")
    name = f"_diagym_policy_{next(_SERIAL)}_{path.stem}"
    file_spec = importlib.util.spec_from_file_location(name, path.resolve())
    if file_spec is None or file_spec.loader is None:
        raise PolicyLoadError(f"--policy {spec}: {where} cannot be imported as a module")
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[name] = module  # dataclasses and pickle look a class's module up there
    try:
        with _first_on_path(path.resolve().parent):
            file_spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise PolicyLoadError(f"--policy {spec}: importing {where} raised "
                              f"{_one_line(error)}") from error
    return module


def _import_module(spec: str, where: str) -> ModuleType:
    importlib.invalidate_caches()  # a module written since the last import is found too
    try:
        with _first_on_path(Path.cwd()):
            return importlib.import_module(where)
    except ModuleNotFoundError as error:
        if error.name is not None and (where == error.name or where.startswith(error.name + ".")):
            raise PolicyLoadError(
                f"--policy {spec}: no module named {error.name!r} (looked in the current "
                f"directory and sys.path; a file is given as path/to/file.py:Name)") from error
        raise PolicyLoadError(f"--policy {spec}: importing {where} raised "
                              f"{_one_line(error)}") from error
    except Exception as error:
        raise PolicyLoadError(f"--policy {spec}: importing {where} raised "
                              f"{_one_line(error)}") from error


def _takes_env(spec: str, name: str, target: Callable[..., Any]) -> bool:
    """True when `target` is called with the env, False when with nothing."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to pass
        return False
    parameters = signature.parameters.values()
    positional = [p for p in parameters if p.default is p.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword = [p for p in parameters if p.default is p.empty and p.kind is p.KEYWORD_ONLY]
    if len(positional) > 1 or keyword:
        raise PolicyLoadError(f"--policy {spec}: {name}{_bare(signature)} needs more than the "
                              f"env; a policy is made by {name}() or {name}(env)")
    return len(positional) == 1


def check_policy(spec: str, made: Any) -> None:
    """PolicyLoadError unless `made` meets the Policy protocol: a callable reset that takes the
    keyword seed, and a callable act that takes (observation, info)."""
    for attr, form, call in (("reset", "reset(*, seed=None)", ((), {"seed": None})),
                             ("act", "act(observation, info)", ((None, None), {}))):
        method = getattr(made, attr, None)
        if method is None:
            raise PolicyLoadError(f"--policy {spec}: the object it made has no {form} method; "
                                  f"{PROTOCOL}")
        if not callable(method):
            raise PolicyLoadError(f"--policy {spec}: the object it made has a non-callable "
                                  f"{attr} ({type(method).__name__}); {PROTOCOL}")
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(*call[0], **call[1])
        except TypeError:
            raise PolicyLoadError(f"--policy {spec}: the object it made has "
                                  f"{attr}{_bare(signature)}, which cannot be called as {form}; "
                                  f"{PROTOCOL}") from None


class PolicyRaised(RuntimeError):
    """The user's policy raised in reset or act: one line naming the spec, the method, the
    episode's task seed and the error, for every command that plays it."""


class ImportedPolicy:
    """The user's policy under the spec it was loaded by. describe() adds the spec to the
    policy's own description (its describe(), else its class name); every other attribute
    (attach_log, episode_counters, text_actions, ...) is the user's object's own. An error
    in its reset or act is a PolicyRaised naming the spec and the episode, not a traceback
    through the runner."""

    def __init__(self, spec: str, policy: Policy) -> None:
        self.spec = spec
        self.policy = policy
        self.seed: int | None = None

    def _raised(self, method: str, error: BaseException) -> PolicyRaised:
        return PolicyRaised(f"--policy {self.spec}: {method} raised {_one_line(error)} (in the "
                            f"episode of task seed {self.seed})")

    def reset(self, *, seed: int | None = None) -> None:
        self.seed = seed
        try:
            self.policy.reset(seed=seed)
        except (Exception, SystemExit) as error:  # a policy's exit() is its error, not ours
            raise self._raised("reset()", error) from error

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        try:
            return self.policy.act(observation, info)
        except (Exception, SystemExit) as error:
            raise self._raised("act()", error) from error

    def describe(self) -> dict[str, Any]:
        describe = getattr(self.policy, "describe", None)
        own = describe() if callable(describe) else type(self.policy).__name__
        return {"import": self.spec, "policy": own}

    def __getattr__(self, name: str) -> Any:
        if name in ("spec", "policy", "seed"):  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.policy, name)


@dataclass(frozen=True)
class ImportedPolicyFactory:
    """The PolicyFactory (diagym.controllers.policy) of one import spec; `text_actions` says whether
    the policy answers in text, so it plays the env behind the text-action wrapper (its
    class, or the function, says so with the attribute `text_actions = True`). It shares
    nothing between workers and plays no harness of ours."""

    spec: str
    name: str
    target: Callable[..., Any]
    takes_env: bool
    text_actions: bool

    def __call__(self, env: Any) -> ImportedPolicy:
        call = f"{self.name}(env)" if self.takes_env else f"{self.name}()"
        try:
            made = self.target(env) if self.takes_env else self.target()
        except Exception as error:
            raise PolicyLoadError(f"--policy {self.spec}: {call} raised "
                                  f"{_one_line(error)}") from error
        check_policy(self.spec, made)
        return ImportedPolicy(self.spec, made)

    def for_executor(self, executor: Any) -> ImportedPolicyFactory:
        return self

    def for_harness(self, harness: str) -> ImportedPolicyFactory:
        return self


def load_policy_factory(spec: str) -> ImportedPolicyFactory:
    """The factory named by `spec` ("package.module:Name" or "path/to/file.py:Name", a path
    relative to the current directory); PolicyLoadError, one line, for anything that is not
    one. The module is imported here, the policy made only when the factory is called."""
    where, _, name = spec.rpartition(":")
    parts = name.split(".")
    if not where or not all(part.isidentifier() for part in parts):
        raise PolicyLoadError(f"--policy {spec}: must be {FORMS}")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    module = _import_file(spec, where) if is_file else _import_module(spec, where)
    target: Any = module
    for i, part in enumerate(parts):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PolicyLoadError(f"--policy {spec}: {where} has no attribute "
                                  f"{'.'.join(parts[:i + 1])!r}") from None
    if not callable(target):
        raise PolicyLoadError(f"--policy {spec}: {name} is {reprlib.repr(target)}, not a "
                              "class or a function that makes a policy")
    text_actions = getattr(target, "text_actions", False)
    if not isinstance(text_actions, bool):
        raise PolicyLoadError(f"--policy {spec}: {name}.text_actions must be True or False; "
                              f"got {text_actions!r}")
    return ImportedPolicyFactory(spec=spec, name=name, target=target,
                         takes_env=_takes_env(spec, name, target), text_actions=text_actions)
