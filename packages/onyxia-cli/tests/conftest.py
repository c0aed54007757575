"""Small ONNX models built with onnx.helper, and runners for the CLI (in-process and subprocess)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onyxia.cli import main

# nox runs pytest in importlib mode: make the helper modules beside this file (llm_cases) importable
sys.path.insert(0, str(Path(__file__).parent))

# Compiled plans and synthesized models go to a folder of this test run (child processes inherit it), never
# to the user's ~/.cache/onyxia: a test sees only the plans this run cached. Tests of the cache set their own.
if "ONYXIA_CACHE_DIR" not in os.environ:
    os.environ["ONYXIA_CACHE_DIR"] = tempfile.mkdtemp(prefix="onyxia-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ONYXIA_CACHE_DIR"], True)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `main(argv)` in this process; argparse exits become return codes."""

    def run(*argv: str) -> CliResult:
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse usage errors and --help
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def cli_subprocess() -> Callable[..., CliResult]:
    """Run ``python -m onyxia.cli`` (the console script's code path) in a child process."""

    def run(*argv: str, prelude: str = "") -> CliResult:
        code = f"{prelude}\nfrom onyxia.cli.main import main\nraise SystemExit(main({list(argv)!r}))"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


def save_model(path: Path, nodes: list, inputs: list, outputs: list, initializers: list, opsets: dict) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = 9
    onnx.save(model, path)
    return path


@pytest.fixture
def mlp_model(tmp_path: Path) -> Path:
    """x[n, 8] -> MatMul W[8, 4] -> Add b -> Softmax = probs; also logits. 36 parameters."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="dense/MatMul"),
        helper.make_node("Add", ["xw", "b"], ["logits"], name="dense/Add"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    return save_model(
        tmp_path / "mlp.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 4]),
        ],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
        {"": 17},
    )


@pytest.fixture
def unsupported_model(tmp_path: Path) -> Path:
    """Two op types no Onyxia package will ever register (a private domain), next to an Add."""
    domain = "org.onyxia.test.unsupported"
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["a"], name="frob_0", domain=domain),
        helper.make_node("Frobnicate", ["a"], ["b"], name="frob_1", domain=domain),
        helper.make_node("Twiddle", ["b"], ["c"], name="twiddle_0", domain=domain),
        helper.make_node("Add", ["c", "x"], ["y"], name="add"),
    ]
    value = helper.make_tensor_value_info
    return save_model(
        tmp_path / "unsupported.onnx",
        nodes,
        [value("x", TensorProto.FLOAT, [4])],
        [value("y", TensorProto.FLOAT, [4])],
        [],
        {"": 17, domain: 1},
    )


@pytest.fixture
def shape_error_model(tmp_path: Path) -> Path:
    """MatMul of [2, 3] by [4, 5]: inner dims disagree."""
    w = np.ones((4, 5), dtype=np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="bad/MatMul")]
    return save_model(
        tmp_path / "shape_error.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [numpy_helper.from_array(w, "w")],
        {"": 17},
    )


def ort_run(path: Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs))))


@pytest.fixture
def reference() -> Callable[[Path, Mapping[str, np.ndarray]], dict[str, np.ndarray]]:
    return ort_run
