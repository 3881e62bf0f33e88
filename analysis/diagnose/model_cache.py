"""The mechanism model kept on disk, so a diagnosis does not re-simulate it in every process.

Building the model (every hypothesis on every battery configuration, SIMULATIONS seeds each)
and the lapse screen of the first fit (every hypothesis at every SCREEN_GRID rate) is most of
the wall time of a diagnosis of a fast agent; both are deterministic functions of their
inputs. The cache holds them under a key that digests every input: the battery's kwargs, the
simulation count and seeds, the smoothing, the hypotheses (names, families, parameters and
rows) and the source of every module that defines a kernel or the hypotheses
(diagym.envs._core.numba_setup.kernel_sources, and this package's likelihood and hypotheses), so an
edit to the simulator or the hypothesis list selects a fresh entry and no stale table is read.

The directory is private to the user (mode 0700) under $XDG_CACHE_HOME/diagym/models (default
~/.cache), never the repository; as with the kernels' cache, only the most recently written
entries are kept (diagym.envs._core.numba_setup._prune). Files are numpy archives read without
pickle, written to a temporary name and renamed, so a reader never sees half a file; a file
that cannot be read is rebuilt. Where no private directory can be made, the model is built
and not kept.

Every array of an archive is its own member with its own header, so reading costs per array,
not per byte: the lapse tables (about 1,400 keys x 10 configurations after a few diagnoses)
are kept as one stacked array per configuration and one array of keys, not one array per
table (some 14,000 members take seconds to read). The layout is CACHE_FORMAT, part of the
key, so an entry written in another layout is never read as this one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from diagym.analysis.diagnose import hypotheses as hypotheses_module
from diagym.analysis.diagnose import likelihood
from diagym.analysis.diagnose.hypotheses import Mechanism, hypotheses
from diagym.analysis.diagnose.likelihood import (
    SIMULATIONS,
    MechanismModel,
    build_model,
    outcome_count,
)
from diagym.envs._core.numba_setup import _private_dir, _prune, kernel_sources, source_digest
from diagym.envs.workflow.params import WorkflowParams

MODEL_FILE = "model.npz"
LAPSE_FILE = "lapse.npz"
# The archives' layout (module docstring); 2: the lapse tables stacked per configuration.
CACHE_FORMAT = 2
LAPSE_KEYS = "keys"
# id(model) -> (the model, its cache directory, lapse tables already on disk)
_kept: dict[int, tuple[MechanismModel, Path, int]] = {}


def cache_root() -> Path | None:
    """$XDG_CACHE_HOME/diagym/models (default ~/.cache/...), or None where it cannot be made
    private."""
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except (KeyError, RuntimeError):
        return None
    root = base / "diagym" / "models"
    return root if _private_dir(root.parent) and _private_dir(root) else None


def model_key(battery: Sequence[WorkflowParams], simulations: int = SIMULATIONS,
              candidates: Sequence[Mechanism] | None = None) -> str:
    """A digest of every input of build_model (module docstring)."""
    kept, aliases = (list(candidates), {}) if candidates is not None else hypotheses()
    sources = [*kernel_sources(), Path(likelihood.__file__), Path(hypotheses_module.__file__)]
    inputs = {
        "battery": [spec.as_dict() for spec in battery],
        "simulations": simulations,
        "seed": likelihood.SIMULATION_SEED,
        "pseudo_count": likelihood.PSEUDO_COUNT,
        "hypotheses": [[m.name, m.family, m.params, list(m.row)] for m in kept],
        "aliases": {k: list(v) for k, v in sorted(aliases.items())},
        "explicit": candidates is not None,
        "sources": source_digest(sorted(set(sources))),
        "format": CACHE_FORMAT,
    }
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


def _read(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def _to_arrays(model: MechanismModel) -> dict[str, np.ndarray]:
    meta = {"mechanisms": [m.name for m in model.mechanisms],
            "aliases": {k: list(v) for k, v in model.aliases.items()}, "index": model.index,
            "simulations": model.simulations}
    arrays = {f"log_p_{c}": log_p for c, log_p in enumerate(model.log_p)}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray], battery: tuple[WorkflowParams, ...],
                 candidates: Sequence[Mechanism] | None) -> MechanismModel | None:
    try:
        meta = json.loads(arrays["meta"].tobytes().decode())
        by_name = {m.name: m for m in (candidates if candidates is not None
                                       else hypotheses()[0])}
        mechanisms = tuple(by_name[name] for name in meta["mechanisms"])
        log_p = tuple(np.asarray(arrays[f"log_p_{c}"], dtype=np.float64)
                      for c in range(len(battery)))
    except (KeyError, ValueError, UnicodeDecodeError):
        return None
    if any(t.shape[0] != len(mechanisms) for t in log_p):
        return None
    return MechanismModel(battery, mechanisms,
                          {k: tuple(v) for k, v in meta["aliases"].items()}, log_p,
                          {k: int(v) for k, v in meta["index"].items()},
                          int(meta["simulations"]))


def _lapse_arrays(model: MechanismModel,
                  tables: dict[tuple[int, int, int], tuple[np.ndarray, ...]]
                  ) -> dict[str, np.ndarray]:
    """The lapse tables as the archive keeps them: LAPSE_KEYS, (index, units, simulations)
    per row, and per configuration c the tables stacked in that row order as "c"."""
    keys = sorted(tables)
    arrays = {LAPSE_KEYS: np.array(keys, dtype=np.int64).reshape(len(keys), 3)}
    for c, spec in enumerate(model.battery):
        arrays[str(c)] = np.array([tables[key][c] for key in keys],
                                  dtype=np.float64).reshape(len(keys), outcome_count(spec))
    return arrays


def _lapse_tables(model: MechanismModel, arrays: dict[str, np.ndarray]
                  ) -> dict[tuple[int, int, int], tuple[np.ndarray, ...]]:
    """The tables of `_lapse_arrays`' layout, each a row of its configuration's stack; none
    when the arrays do not have that layout for this model's battery."""
    keys = arrays.get(LAPSE_KEYS)
    if keys is None or keys.ndim != 2 or keys.shape[1] != 3:
        return {}
    stacks = [arrays.get(str(c)) for c in range(len(model.battery))]
    if any(stack is None or stack.shape != (len(keys), outcome_count(spec))
           for stack, spec in zip(stacks, model.battery, strict=True)):
        return {}
    return {(int(i), int(units), int(simulations)): tuple(stack[row] for stack in stacks)
            for row, (i, units, simulations) in enumerate(keys.tolist())}


def _load_lapse(model: MechanismModel, path: Path) -> None:
    model.lapse_cache.update(_lapse_tables(model, _read(path) or {}))


def cached_model(battery: Sequence[WorkflowParams], simulations: int = SIMULATIONS,
                 candidates: Sequence[Mechanism] | None = None) -> MechanismModel:
    """build_model's model, read from the cache when it holds one for these inputs (with the
    lapse tables kept by save_lapse_tables), else built and written there."""
    battery = tuple(battery)
    root = cache_root()
    if root is None:
        return build_model(battery, simulations, candidates)
    directory = root / model_key(battery, simulations, candidates)
    model = None
    if (directory / MODEL_FILE).exists():
        arrays = _read(directory / MODEL_FILE)
        model = None if arrays is None else _from_arrays(arrays, battery, candidates)
    if model is None:
        model = build_model(battery, simulations, candidates)
        if _private_dir(directory):
            _write(directory / MODEL_FILE, _to_arrays(model))
            _prune(root, directory)  # the oldest entries beyond numba_setup's count go
    if _private_dir(directory):
        _load_lapse(model, directory / LAPSE_FILE)
        _kept[id(model)] = (model, directory, len(model.lapse_cache))
    return model


def save_lapse_tables(model: MechanismModel) -> None:
    """Write the model's lapse tables to its cache entry when it has new ones (a model not
    from cached_model is left alone)."""
    kept = _kept.get(id(model))
    if kept is None or kept[0] is not model or len(model.lapse_cache) == kept[2]:
        return
    directory = kept[1]
    # another process's tables are kept too
    tables = {**_lapse_tables(model, _read(directory / LAPSE_FILE) or {}), **model.lapse_cache}
    _write(directory / LAPSE_FILE, _lapse_arrays(model, tables))
    _kept[id(model)] = (model, directory, len(model.lapse_cache))
