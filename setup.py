"""The package layout pyproject.toml cannot state: the four top-level folders envs/,
controllers/, llm_policies/ and analysis/ install as diagym.envs, diagym.controllers,
diagym.llm_policies and diagym.analysis under diagym/ (its __init__ registers the env ids),
so the wheel's only top-level name is `diagym`. Every subpackage is found, so a new folder
with an __init__.py ships without editing this file; everything else is in pyproject.toml."""

import runpy

from setuptools import find_packages, setup

LAYERS = runpy.run_path("envs/_core/packages.py")["LAYERS"]

subpackages = find_packages(include=[pattern for layer in LAYERS
                                     for pattern in (layer, f"{layer}.*")])
setup(packages=["diagym", *(f"diagym.{name}" for name in subpackages)],
      package_dir={"diagym": "diagym", **{f"diagym.{layer}": layer for layer in LAYERS}})
