"""`onyxia compile`: the plan summary, ``--stats``, and ``--dump-dir`` (ONNX + text after every pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import save_model
from onnx import TensorProto, helper, numpy_helper

DATA = Path(__file__).parent / "data"


@pytest.fixture
def chain_model(tmp_path: Path) -> Path:
    """x[n, 8] @ w[8, 64] (2 KiB: goes to weights.bin) -> Add b -> Relu -> Mul by itself; the last three fuse.
    b is [1, 64], a broadcast FuseMatMulBias leaves to the Add (a [64] bias would fold into the MatMul)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 64)).astype(np.float32)
    b = rng.standard_normal((1, 64)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["h2"], name="add"),
        helper.make_node("Relu", ["h2"], ["h3"], name="relu"),
        helper.make_node("Mul", ["h3", "h3"], ["y"], name="square"),
    ]
    return save_model(
        tmp_path / "chain.onnx",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
        {"": 17},
    )


def _leftovers(directory: Path) -> list[str]:
    """Hidden temporary directories a dump may have left beside its target."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_compile_prints_a_summary(cli, chain_model: Path) -> None:
    result = cli("compile", str(chain_model))
    assert result.code == 0, result.err
    assert "4 nodes -> 2 after" in result.out
    # MatMul by a constant with a symbolic row count plans a kernel per row tile (one row, few rows, many rows);
    # a run dispatches the one its row count falls in
    assert "2 GPU ops, 4 dispatches, 4 shaders" in result.out
    # one unbroken summary line, then the matmul kernels' variant (no adapter: the CPU rasteriser's), no table
    assert result.out.splitlines()[1:] == ["kernel variants: simd8 (3 shaders)"]


def test_compile_stats_prints_the_table(cli, chain_model: Path) -> None:
    result = cli("compile", str(chain_model), "--stats")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines() if line.strip()}
    assert rows["FuseElementwise"][1:4] == ["OPTIMIZATION", "2", "1"]  # 2 runs, 1 changed
    assert rows["FuseElementwise"][-1] == "-2"
    assert rows["total"][-3:] == ["4", "->", "2"]


def test_dump_dir_writes_loadable_onnx_and_text_after_each_change(cli, chain_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    result = cli("compile", str(chain_model), "--dump-dir", str(out))
    assert result.code == 0, result.err
    names = sorted(p.name for p in out.iterdir())
    run = int(next(out.glob("*-FuseElementwise.onnx")).name[:3])  # its place moves as passes are added
    fused_name = f"{run:03d}-FuseElementwise"
    assert names == [
        "000-input.onnx",
        "000-input.txt",
        "004-ShapeInference.onnx",
        "004-ShapeInference.txt",
        f"{fused_name}.onnx",
        f"{fused_name}.txt",
        "index.txt",
        "stats.txt",
        "weights.bin",
    ]
    assert f"dumped {len(names)} files" in result.out
    assert _leftovers(tmp_path) == []
    for path in out.glob("*.onnx"):
        onnx.checker.check_model(str(path), full_check=True)  # external data resolved beside the file
    # w (2 KiB) is stored once for the three dumps; b (256 B) stays inline
    assert (out / "weights.bin").stat().st_size == 8 * 64 * 4
    raw = onnx.load(str(out / f"{fused_name}.onnx"), load_external_data=False)
    locations = {t.name: t.data_location for t in raw.graph.initializer}
    assert locations == {"w": TensorProto.EXTERNAL, "b": TensorProto.DEFAULT}
    fused = onnx.load(str(out / f"{fused_name}.onnx"))
    assert [(n.domain, n.op_type) for n in fused.graph.node] == [("", "MatMul"), ("com.onyxia", "FusedElementwise")]
    assert {o.domain for o in fused.opset_import} == {"", "com.onyxia"}
    np.testing.assert_array_equal(
        numpy_helper.to_array(next(t for t in fused.graph.initializer if t.name == "w")),
        numpy_helper.to_array(next(t for t in onnx.load(str(chain_model)).graph.initializer if t.name == "w")),
    )
    text = (out / f"{fused_name}.txt").read_text()
    assert text.startswith(f"# after pass FuseElementwise (OPTIMIZATION, run {run}): 1 rewrite(s), 4 -> 2 nodes")
    assert "# ops: MatMul x1, com.onyxia::FusedElementwise x1" in text
    assert "graph chain(" in text and "%" in text


def test_bound_dims_show_in_the_dump(cli, chain_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    assert cli("compile", str(chain_model), "--dump-dir", str(out), "--dim", "n=3").code == 0
    assert (out / "index.txt").read_text().splitlines()[1] == "dims: n=3"
    resolved = onnx.load(str(out / "001-SymbolicResolution.onnx"))  # binding n changed the graph
    assert [d.dim_value for d in resolved.graph.input[0].type.tensor_type.shape.dim] == [3, 8]


def test_dumps_before_optimization_match_the_original_in_onnxruntime(
    cli, reference, chain_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dump"
    assert cli("compile", str(chain_model), "--dump-dir", str(out)).code == 0
    x = {"x": np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)}
    expected = reference(chain_model, x)["y"]
    for name in ("000-input.onnx", "004-ShapeInference.onnx"):
        np.testing.assert_array_equal(reference(out / name, x)["y"], expected, err_msg=name)


def test_index_lists_every_run_and_stats_has_totals(cli, chain_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    assert cli("compile", str(chain_model), "--dump-dir", str(out)).code == 0
    index = (out / "index.txt").read_text().splitlines()
    assert index[0] == f"onyxia compile dump of {chain_model}"
    runs = [line for line in index if line[:3].isdigit()]
    assert runs[0].startswith("000  (as loaded)") and runs[0].endswith("000-input.onnx, 000-input.txt")
    resolution = ["SymbolicResolution", "MarkValueInputs", "InsertValueReadbacks"]
    inference = ["ShapeInference", "RecordValueChecks", "LowerContribOps"]
    assert [line.split()[1] for line in runs[1:10]] == resolution + inference * 2
    assert [int(line[:3]) for line in runs] == list(range(len(runs)))
    assert runs[-1].split()[1] == "Planning" and runs[-1].endswith("unchanged")
    assert sum(line.endswith("unchanged") for line in runs) == len(runs) - 3  # input + the two changes
    assert "weights.bin: 1 initializers over 1024 B, stored once" in index
    stats = (out / "stats.txt").read_text().splitlines()
    assert stats[-1].split()[:2] == ["total", str(len(runs) - 1)]


def test_dump_of_a_real_llm_stores_weights_once(cli, tmp_path: Path) -> None:
    model = DATA / "gemma3-tiny-genai" / "fp32" / "model.onnx"
    out = tmp_path / "dump"
    result = cli("compile", str(model), "--dump-dir", str(out))
    assert result.code == 0, result.err
    dumps = sorted(out.glob("*.onnx"))
    assert len(dumps) >= 5
    weights = (out / "weights.bin").stat().st_size
    # once, not once per dump (>= 5 of them); the qkv weights' column blocks (split_packed_matmul) are new tensors
    assert weights <= 1.25 * (model.parent / "model.onnx.data").stat().st_size
    for path in dumps:
        loaded = onnx.load(str(path))
        assert loaded.graph.output and all(t.raw_data or t.float_data or t.int64_data for t in loaded.graph.initializer)
    fused = {n.domain for path in dumps for n in onnx.load(str(path), load_external_data=False).graph.node}
    assert "com.onyxia" in fused


def test_generation_passes_show_in_the_dump_and_the_stats(cli, tmp_path: Path) -> None:
    model = DATA / "gemma3-tiny" / "onnx" / "model.onnx"
    out = tmp_path / "dump"
    result = cli("compile", str(model), "--generation", "--dim", "batch_size=1", "--stats", "--dump-dir", str(out))
    assert result.code == 0, result.err
    for name in ("SliceLogitsToLastPosition", "AddNextToken", "ResidentKvCache"):
        assert any(line.split()[:1] == [name] and line.split()[3] == "1" for line in result.out.splitlines()), name
        assert len(list(out.glob(f"*-{name}.onnx"))) == 1  # changed the graph once
    last = sorted(out.glob("*.onnx"))[-1]
    assert "next_token" in {o.name for o in onnx.load(str(last), load_external_data=False).graph.output}


def test_generation_needs_an_llm(cli, chain_model: Path) -> None:
    result = cli("compile", str(chain_model), "--generation")
    assert result.code == 1 and "not a decoder with the expected signature" in result.err


def test_dump_replaces_an_earlier_dump(cli, chain_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    assert cli("compile", str(chain_model), "--dump-dir", str(out)).code == 0
    (out / "stale.txt").write_text("from before")
    assert cli("compile", str(chain_model), "--dump-dir", str(out)).code == 0
    assert not (out / "stale.txt").exists() and (out / "index.txt").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("case", ["foreign", "file", "file_parent"])
def test_bad_dump_dir_is_a_usage_error_that_changes_nothing(cli, chain_model: Path, tmp_path: Path, case: str) -> None:
    blocker = tmp_path / "blocker"
    if case == "foreign":
        blocker.mkdir()
        (blocker / "notes.txt").write_text("mine")
        target, message = blocker, "is not empty and holds no earlier dump"
    elif case == "file":
        blocker.write_text("x")
        target, message = blocker, "exists and is not a directory"
    else:
        blocker.write_text("x")
        target, message = blocker / "dump", "cannot create it"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = cli("compile", str(chain_model), "--dump-dir", str(target))
    assert result.code == 2
    assert result.err.startswith(f"error: --dump-dir '{target}'") and message in result.err
    assert "Traceback" not in result.err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_missing_or_invalid_model_leaves_no_dump(cli, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"not a protobuf")
    for model in (tmp_path / "nope.onnx", bogus):
        result = cli("compile", str(model), "--dump-dir", str(tmp_path / "dump"))
        assert result.code == 1
        assert result.err.startswith("error:") and model.name in result.err
        assert not (tmp_path / "dump").exists() and _leftovers(tmp_path) == []


def test_compile_error_keeps_the_passes_that_ran(cli, unsupported_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    result = cli("compile", str(unsupported_model), "--dump-dir", str(out))
    assert result.code == 1
    assert result.err.startswith("error: 2 unsupported op type(s)")
    assert f"the passes that ran are dumped in {out}" in result.err
    index = (out / "index.txt").read_text()
    assert "compile failed: UnsupportedOpError: 2 unsupported op type(s)" in index
    assert "in pass ShapeInference" in index
    assert (out / "000-input.onnx").exists() and _leftovers(tmp_path) == []


def test_compile_needs_no_gpu(cli_subprocess, chain_model: Path, tmp_path: Path) -> None:
    result = cli_subprocess(
        "compile", str(chain_model), "--dump-dir", str(tmp_path / "d"), prelude="import sys; sys.modules['wgpu'] = None"
    )
    assert result.code == 0, result.err
    assert (tmp_path / "d" / "index.txt").exists()
