"""The four packages of diagym, lowest layer first: imports point from later to earlier.

In the repository they are the top-level folders of these names; installed they are
diagym.envs, diagym.controllers, diagym.llm_policies and diagym.analysis (setup.py maps the
folders under diagym/, reading this list). The bare names are what code written before that
move imported, so an ImportError naming one gets a hint (controllers.loading)."""

LAYERS = ("envs", "controllers", "llm_policies", "analysis")
PACKAGE = "diagym"
