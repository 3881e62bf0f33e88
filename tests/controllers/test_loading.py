"""load_policy_factory: both spec forms, how Name is called, the protocol check, the run's
identity, sys.path left as it was, and every failure as its exact one line."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest

import diagym  # noqa: F401  (registers the ids)
import tests.user_policy as user
from diagym.controllers.loading import (
    ImportedPolicy,
    PolicyLoadError,
    is_import_path,
    load_policy_factory,
)
from diagym.controllers.rollout import describe_run, rollout
from diagym.controllers.runlog import RunChanged

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = "a policy needs reset(*, seed=None) and act(observation, info)"
FORMS = "package.module:Name or path/to/file.py:Name"


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository root as the current directory, where tests/user_policy.py is."""
    monkeypatch.chdir(ROOT)
    return ROOT


def _env() -> gym.Env:
    return gym.make("StatefulWorkflow-v0")


@pytest.mark.parametrize(("text", "expected"), [
    ("mypkg.agent:MyAgent", True), ("tests/user_policy.py:FirstReady", True),
    ("sb3:runs/model.zip", False), ("exact", False), ("llm", False), ("cache-2+scan-4", False),
])
def test_an_import_path_has_a_colon_and_is_not_sb3(text: str, expected: bool) -> None:
    assert is_import_path(text) is expected


def test_a_module_spec_makes_the_users_own_class(at_root: Path) -> None:
    policy = load_policy_factory("tests.user_policy:FirstReady")(_env())
    assert isinstance(policy, ImportedPolicy)
    assert type(policy.policy) is user.FirstReady


def test_a_file_spec_plays_like_the_class_it_names(at_root: Path) -> None:
    factory = load_policy_factory("tests/user_policy.py:FirstReady")
    policy = factory(_env())
    assert type(policy.policy).__name__ == "FirstReady"
    assert type(policy.policy) is not user.FirstReady  # the file is its own module
    played = rollout(_env(), policy, episodes=16, seed=3)
    expected = rollout(_env(), user.FirstReady(), episodes=16, seed=3)
    assert list(played) == list(expected)


def test_a_file_spec_is_relative_to_the_current_directory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT / "tests")
    assert type(load_policy_factory("user_policy.py:Greedy")(_env()).policy).__name__ == "Greedy"


@pytest.mark.parametrize(("name", "takes_env"), [
    ("FirstReady", False), ("EnvSized", True), ("make_first_ready", True), ("Raises", False),
])
def test_name_is_called_with_the_env_when_it_takes_one_parameter(name: str,
                                                                 takes_env: bool) -> None:
    assert load_policy_factory(f"tests.user_policy:{name}").takes_env is takes_env


def test_a_class_made_with_the_env_sees_it() -> None:
    env = gym.make("StatefulWorkflow-v0", n_ops=12, depth=3)
    policy = load_policy_factory("tests.user_policy:EnvSized")(env)
    assert policy.policy.n_ops == 12
    assert type(load_policy_factory("tests.user_policy:make_first_ready")(env).policy) \
        is user.FirstReady


def test_a_dotted_name_reaches_a_nested_class() -> None:
    policy = load_policy_factory("tests.user_policy:Agents.Nested")(_env())
    assert type(policy.policy) is user.Agents.Nested


def test_each_call_makes_a_new_policy() -> None:
    factory = load_policy_factory("tests.user_policy:FirstReady")
    first, second = factory(_env()), factory(_env())
    assert first.policy is not second.policy


def test_text_actions_is_read_from_the_class() -> None:
    assert load_policy_factory("tests.user_policy:JsonFirstReady").text_actions is True
    assert load_policy_factory("tests.user_policy:FirstReady").text_actions is False


def test_the_users_own_attributes_and_counters_come_through() -> None:
    policy = load_policy_factory("tests.user_policy:Counted")(_env())
    assert not hasattr(load_policy_factory("tests.user_policy:FirstReady")(_env()),
                       "episode_counters")
    records = rollout(_env(), policy, episodes=4)
    assert [r.counters for r in records] == [{"acts": r.calls} for r in records]
    assert load_policy_factory("tests.user_policy:JsonFirstReady")(_env()).text_actions is True


def test_the_runs_identity_names_the_spec() -> None:
    env = _env()
    plain = load_policy_factory("tests.user_policy:FirstReady")(env)
    described = load_policy_factory("tests.user_policy:Described")(env)
    assert describe_run(env, plain)["policy"] == {"import": "tests.user_policy:FirstReady",
                                                  "policy": "FirstReady"}
    assert describe_run(env, described)["policy"] == {
        "import": "tests.user_policy:Described", "policy": {"agent": "first-ready", "slot": 0}}


def test_two_specs_of_one_class_name_are_two_runs(at_root: Path, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    by_module = load_policy_factory("tests.user_policy:FirstReady")
    rollout(_env(), by_module(_env()), episodes=2, log=log)
    rollout(_env(), by_module(_env()), episodes=3, log=log, resume=True)  # the same run
    by_file = load_policy_factory("tests/user_policy.py:FirstReady")
    with pytest.raises(RunChanged, match="policy.import"):
        rollout(_env(), by_file(_env()), episodes=3, log=log, resume=True)


def test_a_files_siblings_import_and_sys_path_is_restored(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    (tmp_path / "agent_helpers_xq.py").write_text("SLOT = 0\n")
    (tmp_path / "agent_xq.py").write_text(
        "from agent_helpers_xq import SLOT\n"
        "from tests.user_policy import first_ready\n\n"
        "class Agent:\n"
        "    def reset(self, *, seed=None):\n"
        "        pass\n\n"
        "    def act(self, observation, info):\n"
        "        return first_ready(observation, info), SLOT\n")
    before = list(sys.path)
    policy = load_policy_factory(f"{tmp_path}/agent_xq.py:Agent")(_env())
    assert sys.path == before
    assert list(rollout(_env(), policy, 4)) == list(rollout(_env(), user.FirstReady(), 4))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "module_agent_xq.py").write_text("from agent_xq import Agent\n")
    load_policy_factory("module_agent_xq:Agent")  # the current directory, for the module form
    assert sys.path == before
    with pytest.raises(PolicyLoadError):
        load_policy_factory("no_module_xq:Agent")
    assert sys.path == before


def _error(spec: str, *, make: bool = False) -> str:
    with pytest.raises(PolicyLoadError) as raised:
        factory = load_policy_factory(spec)
        if make:
            factory(_env())
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("spec", ["nocolon", "tests.user_policy:", ":FirstReady",
                                  "tests.user_policy:Bad-Name", "tests.user_policy:Agents..X"])
def test_a_spec_of_another_form_is_refused(spec: str) -> None:
    assert _error(spec) == f"--policy {spec}: must be {FORMS}"


def test_a_missing_file_names_the_current_directory(at_root: Path) -> None:
    assert _error("tests/nope.py:X") == (
        f"--policy tests/nope.py:X: no file tests/nope.py (a path is relative to the current "
        f"directory, {ROOT})")


def test_a_path_to_something_else_than_a_py_file_is_refused(at_root: Path) -> None:
    assert _error("tests/user_policy:FirstReady") == (
        f"--policy tests/user_policy:FirstReady: tests/user_policy is not a .py file; give "
        f"{FORMS}")


@pytest.mark.parametrize(("spec", "missing"), [
    ("no_such_module_xq:X", "no_such_module_xq"), ("tests.no_such_xq:X", "tests.no_such_xq"),
])
def test_a_missing_module_is_refused(spec: str, missing: str) -> None:
    assert _error(spec) == (
        f"--policy {spec}: no module named {missing!r} (looked in the current directory and "
        "sys.path; a file is given as path/to/file.py:Name)")


@pytest.mark.parametrize(("source", "raised"), [
    ("import no_such_dependency_xq\n",
     "ModuleNotFoundError: No module named 'no_such_dependency_xq'"),
    ("raise ImportError('needs CUDA')\n", "ImportError: needs CUDA"),
    ("raise ValueError('line one\\nline two')\n", "ValueError: line one line two"),
    ("raise KeyError\n", "KeyError"),
])
def test_an_import_that_raises_is_one_line_in_both_forms(
        source: str, raised: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken_xq.py").write_text(source)
    assert _error("broken_xq.py:X") == (
        f"--policy broken_xq.py:X: importing broken_xq.py raised {raised}")
    assert _error("broken_xq:X") == f"--policy broken_xq:X: importing broken_xq raised {raised}"
    assert not any(name.endswith("_broken_xq") for name in sys.modules)


def test_a_syntax_error_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "typo_xq.py").write_text("class Agent(:\n")
    assert _error("typo_xq.py:Agent").startswith(
        "--policy typo_xq.py:Agent: importing typo_xq.py raised SyntaxError: ")


@pytest.mark.parametrize(("spec", "message"), [
    ("tests.user_policy:Nope", "tests.user_policy has no attribute 'Nope'"),
    ("tests.user_policy:Agents.Missing", "tests.user_policy has no attribute 'Agents.Missing'"),
    ("tests.user_policy:LIMIT", "LIMIT is 3, not a class or a function that makes a policy"),
    ("tests.user_policy:NeedsTwo",
     "NeedsTwo(env, model) needs more than the env; a policy is made by NeedsTwo() or "
     "NeedsTwo(env)"),
    ("tests.user_policy:BadTextActions",
     "BadTextActions.text_actions must be True or False; got 'yes'"),
])
def test_a_name_that_makes_no_policy_is_refused_on_load(spec: str, message: str) -> None:
    assert _error(spec) == f"--policy {spec}: {message}"


@pytest.mark.parametrize(("name", "message"), [
    ("NoAct", f"the object it made has no act(observation, info) method; {PROTOCOL}"),
    ("ActNotCallable", f"the object it made has a non-callable act (int); {PROTOCOL}"),
    ("ResetWithoutSeed",
     f"the object it made has reset(), which cannot be called as reset(*, seed=None); "
     f"{PROTOCOL}"),
    ("returns_none", f"the object it made has no reset(*, seed=None) method; {PROTOCOL}"),
    ("Raises", "Raises() raised RuntimeError: no GPU here"),
])
def test_an_object_that_is_no_policy_is_refused_when_made(name: str, message: str) -> None:
    spec = f"tests.user_policy:{name}"
    assert _error(spec, make=True) == f"--policy {spec}: {message}"


def test_the_contracts_message_for_a_file(at_root: Path) -> None:
    assert _error("tests/user_policy.py:NoAct", make=True) == (
        "--policy tests/user_policy.py:NoAct: the object it made has no act(observation, "
        "info) method; a policy needs reset(*, seed=None) and act(observation, info)")


def test_an_old_top_level_name_is_answered_with_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Code written when diagym's packages were top-level (`from envs.workflow.params import
    ...`), run beside a folder of the user's called envs/: the one line says what to write
    and which `envs` was found instead, so the wrong import is never silent."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "__init__.py").write_text("")
    old = "envs"  # the old spelling, kept out of a string the layering test reads as code
    (tmp_path / "old_xq.py").write_text(f"from {old}.workflow.params import WorkflowParams\n")
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # the user's envs is forgotten after
    assert _error("old_xq.py:X") == (
        "--policy old_xq.py:X: importing old_xq.py raised ModuleNotFoundError: No module named "
        "'envs.workflow' (diagym's envs is now diagym.envs: write "
        "`from diagym.envs.x import y` for `from envs.x import y`; the 'envs' imported is "
        f"{tmp_path / 'envs' / '__init__.py'}, not diagym's)")
