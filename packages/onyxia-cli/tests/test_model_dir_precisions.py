"""The onnx-community precision table: every row's file is found, --precision picks any of them, and the
default prefers the q4f16/q4/fp16/fp32 rows over bnb4/int8/uint8 even where those are smaller."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from onyxia.cli.llm.model_dir import PRECISIONS, resolve_model_dir
from onyxia.core import ModelLoadError

DATA = Path(__file__).parent / "data"
GEMMA = DATA / "gemma3-tiny"


def _size(precision: str) -> int:
    model = GEMMA / "onnx" / PRECISIONS[precision].file
    return model.stat().st_size + model.with_name(model.name + "_data").stat().st_size


def _directory_with(tmp_path: Path, precisions: list[str]) -> Path:
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(GEMMA / name, tmp_path / name)
    (tmp_path / "onnx").mkdir()
    for precision in precisions:
        model = GEMMA / "onnx" / PRECISIONS[precision].file
        for path in (model, model.with_name(model.name + "_data")):
            shutil.copy(path, tmp_path / "onnx" / path.name)
    return tmp_path


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_every_row_is_found_by_name(precision: str) -> None:
    found = resolve_model_dir(GEMMA, precision, features={"shader-f16"})
    assert (found.precision, found.model_path.name) == (precision, PRECISIONS[precision].file)


_OTHERS = ["bnb4", "int8", "uint8"]


def test_default_prefers_q4_over_smaller_other_rows() -> None:
    assert all(_size(p) < _size("q4") for p in _OTHERS)  # the by_default rule is what keeps q4
    assert resolve_model_dir(GEMMA, None, features={"immediates"}).precision == "q4"


def test_default_falls_back_to_the_smallest_other_row(tmp_path: Path) -> None:
    directory = _directory_with(tmp_path, _OTHERS)
    assert resolve_model_dir(directory, None, features={"immediates"}).precision == min(_OTHERS, key=_size)
    (directory / "onnx" / PRECISIONS[min(_OTHERS, key=_size)].file).unlink()
    rest = [p for p in _OTHERS if p != min(_OTHERS, key=_size)]
    assert resolve_model_dir(directory, None).precision == min(rest, key=_size)


def test_unknown_and_absent_precisions_name_the_table(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"--precision 'q8' is unknown; choose one of \['bnb4', 'fp16'"):
        resolve_model_dir(GEMMA, "q8")
    directory = _directory_with(tmp_path, ["q4"])
    with pytest.raises(ModelLoadError, match=r"precision bnb4 \(model_bnb4.onnx\) is not present; found \['q4'\]"):
        resolve_model_dir(directory, "bnb4")
