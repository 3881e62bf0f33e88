"""Which model directories `diagym train` wrote, as this user: a model.zip is a pickle, and
loading one runs whatever code it holds, so only runs training recorded are loaded unasked.

A hash file beside the model certified nothing: whoever could write the model could write
the hash beside it too. Training records each checkpoint in a store of the user's own
(TRUST_STORE, mode 0700): one empty file named by the digest of model.zip's sha256 and
config.json's (config.json names the env gymnasium builds, so it is covered as well). A model
or config changed since, or copied from another user, is not in the store. The store says
"this user's diagym wrote these bytes", not "these bytes are safe": it is provenance, not a
signature.

Reading is bounded: config.json must be a regular file of at most MAX_CONFIG_BYTES (a FIFO
or /dev/zero there would hang or exhaust the load), and a model.zip whose entries would
inflate past MAX_UNZIPPED_BYTES is refused before SB3 opens it, trusted or not.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from pathlib import Path

from diagym.controllers.provenance import file_sha256

TRUST_STORE_ENV = "DIAGYM_TRUSTED_MODELS"
MAX_CONFIG_BYTES = 1 << 20
MAX_UNZIPPED_BYTES = 1 << 30  # diagym's networks are a few MB; SB3 reads every entry whole
MAX_ZIP_ENTRIES = 256


def store_dir() -> Path:
    """$DIAGYM_TRUSTED_MODELS, else $XDG_DATA_HOME/diagym/trusted-models (default
    ~/.local/share)."""
    explicit = os.environ.get(TRUST_STORE_ENV)
    if explicit:
        return Path(explicit)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "diagym" / "trusted-models"


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most `limit` of them; OSError (a FIFO, a device, a
    directory, a missing file) or ValueError (too large) otherwise, without blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


def run_digest(model: Path, config: Path) -> str:
    """The store's key of a run: model.zip's sha256 and config.json's, hashed together."""
    config_digest = hashlib.sha256(read_regular(config, MAX_CONFIG_BYTES)).hexdigest()
    return hashlib.sha256(f"{file_sha256(model)}\0{config_digest}".encode()).hexdigest()


def record_trained(model: Path, config: Path) -> None:
    """Record that this user's training wrote this model.zip and config.json."""
    store = store_dir()
    store.mkdir(mode=0o700, parents=True, exist_ok=True)
    entry = store / run_digest(model, config)
    fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{model.parent.resolve()}\n")  # where it was written, for the user


def was_trained_here(model: Path, config: Path) -> bool:
    """Whether the store records this model.zip with this config.json."""
    return (store_dir() / run_digest(model, config)).is_file()


def check_archive(model: Path) -> None:
    """ValueError unless model.zip is a zip whose entries are few and inflate to at most
    MAX_UNZIPPED_BYTES: SB3 reads each entry whole into memory."""
    try:
        with zipfile.ZipFile(model) as archive:
            entries = archive.infolist()
    except (OSError, zipfile.BadZipFile) as error:
        raise ValueError(f"model: {model} is not a readable zip archive ({error})") from None
    inflated = sum(entry.file_size for entry in entries)
    if len(entries) > MAX_ZIP_ENTRIES or inflated > MAX_UNZIPPED_BYTES:
        raise ValueError(f"model: {model} holds {len(entries)} entries inflating to "
                         f"{inflated:,} bytes; a model is at most {MAX_ZIP_ENTRIES} entries "
                         f"and {MAX_UNZIPPED_BYTES:,} bytes")
