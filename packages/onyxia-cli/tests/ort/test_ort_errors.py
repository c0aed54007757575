"""Every error class onyxia.ort answers as onnxruntime does, table-driven: each case runs on
onnxruntime (the oracle, at test time) and on onyxia.ort, and the class name and the first line up
to where onnxruntime's own detail begins must agree. Onyxia's exception, where there is one, must be
the `__cause__`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime
import pytest

import onyxia.ort as ort

X = np.ones((2, 3), np.float32)


def _session(module: ModuleType, path: Path):
    if module is onnxruntime:
        return module.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return module.InferenceSession(str(path))


Case = Callable[[ModuleType, Path, Path], object]  # (module, add_mul model, tmp dir)

CASES: dict[str, Case] = {
    "unknown input name": lambda m, p, _: _session(m, p).run(None, {"x": X, "q": X}),
    "unknown output name": lambda m, p, _: _session(m, p).run(["nope"], {"x": X}),
    "missing input": lambda m, p, _: _session(m, p).run(None, {}),
    "wrong rank": lambda m, p, _: _session(m, p).run(None, {"x": np.ones(3, np.float32)}),
    "wrong dtype (float64)": lambda m, p, _: _session(m, p).run(None, {"x": X.astype(np.float64)}),
    "wrong dtype (int64)": lambda m, p, _: _session(m, p).run(None, {"x": X.astype(np.int64)}),
    "dim contradicting a fixed one": lambda m, p, _: _session(m, p).run(None, {"x": np.ones((2, 4), np.float32)}),
    "two fixed dims contradicted": lambda m, p, _: _session(m, p).run(None, {"x": np.ones((2, 5, 1), np.float32)}),
    "python scalar feed": lambda m, p, _: _session(m, p).run(None, {"x": 1.0}),
    "string feed": lambda m, p, _: _session(m, p).run(None, {"x": "abc"}),
    "tuple feed": lambda m, p, _: _session(m, p).run(None, {"x": (1.0, 2.0, 3.0)}),
    "no such file": lambda m, _, d: m.InferenceSession(str(d / "absent.onnx")),
    "a directory": lambda m, _, d: m.InferenceSession(str(d)),
    "garbage file": lambda m, _, d: m.InferenceSession(str(_write(d / "garbage.onnx", b"garbage\x00\x01junk"))),
    "garbage bytes": lambda m, _, d: m.InferenceSession(b"garbage\x00\x01junk"),
    "not a path or bytes": lambda m, _, d: m.InferenceSession(42),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _raised(case: Case, module: ModuleType, model: Path, folder: Path) -> BaseException:
    with pytest.raises(Exception) as caught:
        case(module, model, folder)
    return caught.value


def _first_line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_matches_onnxruntime(name: str, add_mul: Path, tmp_path: Path) -> None:
    case = CASES[name]
    theirs = _raised(case, onnxruntime, add_mul, tmp_path)
    ours = _raised(case, ort, add_mul, tmp_path)
    assert type(ours).__name__ == type(theirs).__name__, (ours, theirs)
    assert _first_line(ours) == _first_line(theirs)
    if type(theirs).__module__.startswith("onnxruntime"):
        assert type(ours).__module__ == "onyxia.ort.errors"
        assert isinstance(ours, getattr(ort, type(ours).__name__, Exception))


def test_onyxias_error_is_kept_as_the_cause(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"garbage\x00\x01junk")
    with pytest.raises(ort.InvalidProtobuf) as caught:
        ort.InferenceSession(path)
    assert caught.value.__cause__ is not None
    assert str(path) in str(caught.value.__cause__)
    assert "not a valid ONNX protobuf" in str(caught.value)  # Onyxia's detail follows the first line
