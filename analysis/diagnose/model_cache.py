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
from diagym.analysis.diagnose.likelihood import SIMULATIONS, MechanismModel, build_model
from diagym.envs._core.numba_setup import _private_dir, _prune, kernel_sources, source_digest
from diagym.envs.workflow.params import WorkflowParams

MODEL_FILE = "model.npz"
LAPSE_FILE = "lapse.npz"
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


def _load_lapse(model: MechanismModel, path: Path) -> None:
    arrays = _read(path) or {}
    found: dict[tuple[int, int, int], dict[int, np.ndarray]] = {}
    for name, table in arrays.items():
        index, units, simulations, c = (int(x) for x in name.split("_"))
        found.setdefault((index, units, simulations), {})[c] = table
    for key, per in found.items():
        if sorted(per) == list(range(len(model.battery))):
            model.lapse_cache[key] = tuple(per[c] for c in range(len(model.battery)))


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
    arrays = _read(directory / LAPSE_FILE) or {}  # another process's tables are kept too
    arrays.update({f"{i}_{units}_{simulations}_{c}": table
                   for (i, units, simulations), tables in model.lapse_cache.items()
                   for c, table in enumerate(tables)})
    _write(directory / LAPSE_FILE, arrays)
    _kept[id(model)] = (model, directory, len(model.lapse_cache))
