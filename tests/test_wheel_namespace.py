"""The wheel installs one name, `diagym`, and nothing a user installs or keeps beside their
script shadows it: built from this tree, installed into a fresh environment after a package
that installs a top-level `envs`, and used from a folder holding the user's own `envs/` and
`analysis/`, every registered id makes, `diagym run` plays the user's agent and `diagym
diagnose` diagnoses; uninstalling the other package leaves diagym whole.

The fresh environment is a venv without diagym that sees this environment's dependencies
(numpy, numba, gymnasium, ...) through a path entry, so nothing is downloaded; an editable
install's finder is not run there (a .pth file is read only in a site directory)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from diagym.envs._core.packages import LAYERS, PACKAGE
from tests.conftest import scaled

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (PACKAGE, *LAYERS, "setup.py", "pyproject.toml", "README.md")
FOREIGN_SETUP = """\
from setuptools import setup
setup(name="foreign-envs", version="1.0", packages=["envs"])
"""

USER_SCRIPT = """\
import json, sys
import gymnasium as gym
import diagym
import envs, analysis  # the user's own folders, beside this script

ids = sorted(i for i, spec in gym.registry.items()
             if str(spec.entry_point).startswith("diagym."))
made = {}
for env_id in ids:
    env = gym.make(env_id)
    observation, info = env.reset(seed=0)
    made[env_id] = sorted(observation)
    env.close()
print(json.dumps({"diagym": diagym.__file__, "version": diagym.__version__,
                  "envs": envs.__file__, "analysis": analysis.__file__,
                  "users_envs": envs.MINE, "ids": ids, "made": made}))
"""

USER_AGENT = """\
import numpy as np
import envs  # the user's own module, not diagym's
from diagym.controllers.policy import Policy  # noqa: F401  (the contract, by its one name)


class FirstReady:
    def reset(self, *, seed=None):
        assert envs.MINE

    def act(self, observation, info):
        mask = info["action_mask"]
        return np.array([int(np.flatnonzero(mask[:len(observation["completed"])])[0]), 0])
"""

OLD_AGENT = """\
from {old}.policy import Policy


class Old:
    def reset(self, *, seed=None):
        pass

    def act(self, observation, info):
        return (0, 0)
"""


def _run(argv: list[str], cwd: Path, seconds: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          timeout=scaled(seconds), check=False)


def _pip(venv_python: Path, *args: str) -> None:
    done = _run([sys.executable, "-m", "pip", "--python", str(venv_python), "--quiet",
                 "--disable-pip-version-check", *args], ROOT)
    assert done.returncode == 0, done.stderr


def _wheel(source: Path, out: Path) -> Path:
    done = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                 "--no-build-isolation", "--disable-pip-version-check", "-w", str(out),
                 str(source)], source)
    assert done.returncode == 0, done.stderr
    return next(out.glob("*.whl"))


def top_level_names(wheel: Path) -> set[str]:
    """The names a wheel puts at the top of site-packages (its .dist-info aside)."""
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    return {top.removesuffix(".py") for top in tops if not top.endswith(".dist-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """This tree's wheel and a foreign top-level `envs` installed, in that order, into a
    fresh venv; and a user's folder with envs/, analysis/ and two agents."""
    base = tmp_path_factory.mktemp("wheel")
    tree = base / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.egg-info", "build")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=ignore)
        else:
            shutil.copy2(source, tree / name)
    wheel = _wheel(tree, base / "dist")

    foreign = base / "foreign"
    (foreign / "envs").mkdir(parents=True)
    (foreign / "envs" / "__init__.py").write_text("FOREIGN = True\n")
    (foreign / "setup.py").write_text(FOREIGN_SETUP)
    foreign_wheel = _wheel(foreign, base / "foreign_dist")

    venv = base / "venv"
    done = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   base).stdout.strip()
    Path(purelib, "_parent_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _pip(python, "install", "--no-deps", "--no-index", str(wheel))
    _pip(python, "install", "--no-deps", "--no-index", str(foreign_wheel))

    user = base / "project"
    for name in ("envs", "analysis"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text("MINE = True\n")
    (user / "check.py").write_text(USER_SCRIPT)
    (user / "agent.py").write_text(USER_AGENT)
    (user / "old_agent.py").write_text(OLD_AGENT.format(old="controllers"))
    return {"wheel": wheel, "venv": venv, "python": python, "user": user}


def test_the_wheel_installs_one_top_level_name(installed: dict[str, Path]) -> None:
    assert top_level_names(installed["wheel"]) == {PACKAGE}


@pytest.mark.timeout(900)
def test_every_id_makes_beside_the_users_folders(installed: dict[str, Path]) -> None:
    done = _run([str(installed["python"]), "check.py"], installed["user"], seconds=600)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["diagym"]).is_relative_to(installed["venv"])
    assert seen["envs"] == str(installed["user"] / "envs" / "__init__.py")
    assert seen["analysis"] == str(installed["user"] / "analysis" / "__init__.py")
    assert seen["users_envs"] is True and seen["version"]
    assert {"StatefulWorkflow-v0", "DACSSteering-v0"} <= set(seen["ids"])
    assert set(seen["made"]) == set(seen["ids"])


@pytest.mark.timeout(900)
def test_run_and_diagnose_from_the_users_folder(installed: dict[str, Path]) -> None:
    diagym = str(installed["venv"] / "bin" / "diagym")
    user = installed["user"]
    played = _run([diagym, "run", "--env", "StatefulWorkflow-v0", "--policy", "agent:FirstReady",
                   "--episodes", "4", "--json"], user, seconds=600)
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout)["episodes"] == 4
    # the user's agent again, importing the user's own envs beside diagym's
    diagnosed = _run([diagym, "diagnose", "--policy", "agent:FirstReady", "--budget", "32",
                      "--json"], user, seconds=600)
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert "headline" in json.loads(diagnosed.stdout)


def test_code_written_against_the_old_names_gets_one_line(installed: dict[str, Path]) -> None:
    """A policy importing `controllers.policy` (diagym's name before the move) is refused in
    one line that says what to write; with a user's own envs/ it names the folder found."""
    diagym = str(installed["venv"] / "bin" / "diagym")
    done = _run([diagym, "run", "--env", "StatefulWorkflow-v0", "--policy", "old_agent:Old",
                 "--episodes", "1"], installed["user"])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "No module named 'controllers'" in lines[0]
    assert lines[0].endswith("(diagym's controllers is now diagym.controllers: write `from "
                             "diagym.controllers.x import y` for `from controllers.x import y`)")


def test_uninstalling_a_package_named_envs_leaves_diagym_whole(
        installed: dict[str, Path], tmp_path: Path) -> None:
    python = installed["python"]
    _pip(python, "uninstall", "--yes", "foreign-envs")
    done = _run([str(python), "-c", "import gymnasium as gym; "
                 "gym.make('diagym:StatefulWorkflow-v0').reset(seed=0); print('ok')"], tmp_path,
                seconds=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
