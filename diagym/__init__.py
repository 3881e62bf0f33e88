"""diagym: Gymnasium environments, reference controllers, LLM policies and diagnoses for
agents that act through tools and text.

`import diagym` registers every env id with Gymnasium, so `gym.make("StatefulWorkflow-v0")`
works after it, and `gym.make("diagym:StatefulWorkflow-v0")` works with no import at all.
The library is `diagym.envs`, `diagym.controllers`, `diagym.llm_policies` and
`diagym.analysis`; the wheel installs no other top-level name, so no other package and no
folder of a user's called envs/ or analysis/ can shadow it. In the repository the four
packages are the top-level folders of the same names: setup.py maps them under this one.
"""

from __future__ import annotations

from diagym import envs  # noqa: F401  (registers the ids)


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("diagym")
    raise AttributeError(f"module 'diagym' has no attribute {name!r}")
