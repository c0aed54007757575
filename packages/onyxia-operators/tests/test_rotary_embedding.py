"""com.microsoft RotaryEmbedding against onnxruntime: both pairings, 3-D and 4-D input, partial rotary,
every position-id format, f32 and f16, symbolic dims, and the exact Gemma 3 fixture configuration."""

import numpy as np
import pytest
from oracle import assert_close, check_op, compile_model, make_model, onyxia_outputs, reference_outputs, runtime

from onyxia.core import ShapeInferenceError

RNG = np.random.default_rng(0)
MS = "com.microsoft"


def _cache(width: int, positions: int = 512, dtype: type = np.float32, theta: float = 1e4) -> tuple:
    angles = np.arange(positions)[:, None] * theta ** (-np.arange(width) / width)[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _inputs(x_shape: tuple[int, ...], pos: np.ndarray, width: int, dtype: type = np.float32) -> dict:
    cos, sin = _cache(width, dtype=dtype)
    return {"x": RNG.standard_normal(x_shape).astype(dtype), "pos": pos, "cos": cos, "sin": sin}


def _positions(batch: int, seq: int) -> np.ndarray:
    return RNG.integers(0, 500, (batch, seq)).astype(np.int64)


@pytest.mark.parametrize("interleaved", [2, 99, -1])
def test_interleaved_other_than_1_pairs_halves_as_onnxruntime_does(interleaved: int) -> None:
    inputs = _inputs((2, 5, 3 * 16), _positions(2, 5), 8, np.float32)
    check_op("RotaryEmbedding", inputs, {"interleaved": interleaved}, domain=MS)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_layouts_and_pairings(dtype: type, interleaved: int, layout: str) -> None:
    x_shape = (2, 5, 3 * 16) if layout == "3d" else (2, 3, 5, 16)
    inputs = _inputs(x_shape, _positions(2, 5), 8, dtype)
    check_op("RotaryEmbedding", inputs, {"interleaved": interleaved}, domain=MS)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_partial_rotary(dtype: type, interleaved: int, layout: str) -> None:
    """Only the first rotary_embedding_dim elements of each head rotate; the cache is rotary_dim / 2 wide."""
    x_shape = (2, 4, 2 * 16) if layout == "3d" else (2, 2, 4, 16)
    attrs = {"interleaved": interleaved, "num_heads": 2, "rotary_embedding_dim": 8}
    check_op("RotaryEmbedding", _inputs(x_shape, _positions(2, 4), 4, dtype), attrs, domain=MS)


@pytest.mark.parametrize("pos", [np.array([37], np.int64), np.array(5, np.int64)], ids=["[1]", "scalar"])
@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_one_start_position(pos: np.ndarray, layout: str) -> None:
    """A one-element position_ids is the first position; the rest follow (onnxruntime's format 0)."""
    x_shape = (2, 6, 32) if layout == "3d" else (2, 2, 6, 16)
    check_op("RotaryEmbedding", _inputs(x_shape, pos, 8), domain=MS)


@pytest.mark.parametrize("pos_shape", [(1, 6), (6,)])
def test_one_row_of_ids_shared_by_the_batch(pos_shape: tuple[int, ...]) -> None:
    """onnxruntime refuses [1, S] and [S] ids for batch 2; Onyxia reads them as that row for every item,
    which must equal onnxruntime given the row repeated."""
    row = _positions(1, 6)
    inputs = _inputs((2, 6, 32), row.reshape(pos_shape), 8)
    actual = onyxia_outputs(make_model("RotaryEmbedding", inputs, domain=MS), {k: v for k, v in inputs.items()})
    repeated = {**inputs, "pos": np.repeat(row, 2, axis=0)}
    expected = reference_outputs(make_model("RotaryEmbedding", repeated, domain=MS), repeated, "ort")
    assert_close(actual[0], expected[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("heads", [4, 1], ids=["q", "k"])
def test_gemma_fixture_configuration(dtype: type, heads: int) -> None:
    """gemma3-tiny: x [1, S, heads * 16], ids [1, S], caches [512, 8], interleaved 0, num_heads 0."""
    cos, sin = _cache(8, 512, dtype, theta=1e6)
    inputs = {"x": RNG.standard_normal((1, 7, heads * 16)).astype(dtype), "pos": np.arange(3, 10)[None], "cos": cos}
    inputs["sin"] = sin
    attrs = {"interleaved": 0, "num_heads": 0, "rotary_embedding_dim": 0}
    check_op("RotaryEmbedding", inputs, attrs, domain=MS, initializers=["cos", "sin"])
    dims = {"x": ["batch_size", "sequence_length", heads * 16], "pos": ["batch_size", "sequence_length"]}
    check_op("RotaryEmbedding", inputs, attrs, domain=MS, initializers=["cos", "sin"], dim_params=dims)


def test_symbolic_dims_rebind_without_recompiling() -> None:
    dims = {"x": ["batch", "seq", 64], "pos": ["batch", "seq"]}
    model = make_model("RotaryEmbedding", _inputs((1, 1, 64), _positions(1, 1), 8), domain=MS, dim_params=dims)
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for batch, seq in [(2, 5), (1, 9), (3, 1)]:
        feeds = _inputs((batch, seq, 64), _positions(batch, seq), 8)
        assert_close(executor.run(feeds)["y0"], reference_outputs(model, feeds, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines


def test_known_inputs_fold_to_no_gpu_step() -> None:
    for attrs in ({}, {"interleaved": 1, "num_heads": 2, "rotary_embedding_dim": 8}):
        inputs = _inputs((2, 3, 32), _positions(2, 3), 8 if not attrs else 4)
        model = make_model("RotaryEmbedding", inputs, attrs, domain=MS, initializers=list(inputs))
        assert compile_model(model).operations == []
        check_op("RotaryEmbedding", inputs, attrs, domain=MS, initializers=list(inputs))


def test_rotary_dim_without_num_heads_names_node_and_attribute() -> None:
    model = make_model(
        "RotaryEmbedding", _inputs((1, 3, 32), _positions(1, 3), 4), {"rotary_embedding_dim": 8}, domain=MS
    )
    model.graph.node[0].name = "rope_q"
    with pytest.raises(ShapeInferenceError, match=r"node 'rope_q' \(RotaryEmbedding.*rotary_embedding_dim.*num_heads"):
        compile_model(model)


# ----- ai.onnx RotaryEmbedding (opset 23), lowered to the contrib op above -----------------------
def _onnx_cache(rows: tuple[int, ...], width: int) -> tuple[np.ndarray, np.ndarray]:
    angles = RNG.uniform(0, 6.3, (*rows, width)).astype(np.float32)
    return np.cos(angles), np.sin(angles)


@pytest.mark.parametrize(
    ("x_shape", "attrs", "width"),
    [
        ((2, 3, 5, 8), {}, 4),  # 4-D [B, N, S, H], whole head
        ((2, 3, 5, 8), {"interleaved": 1}, 4),
        ((2, 3, 5, 8), {"rotary_embedding_dim": 4}, 2),  # partial rotary
        ((2, 5, 3 * 8), {"num_heads": 3, "interleaved": 1, "rotary_embedding_dim": 4}, 2),  # 3-D
    ],
)
def test_onnx_rotary_with_position_ids(x_shape: tuple[int, ...], attrs: dict, width: int) -> None:
    cos, sin = _onnx_cache((50,), width)
    inputs = {"x": RNG.standard_normal(x_shape).astype(np.float32), "cos": cos, "sin": sin}
    inputs["pos"] = RNG.integers(0, 50, (2, 5)).astype(np.int64)
    check_op("RotaryEmbedding", inputs, attrs, opset=23)


@pytest.mark.parametrize("batch", [1, 2])
def test_onnx_rotary_per_token_caches(batch: int) -> None:
    """No position_ids: cos/sin are [B, S, R/2] (PyTorch's exporter: Cos(freqs), Sin(freqs))."""
    cos, sin = _onnx_cache((batch, 5), 4)
    inputs = {"x": RNG.standard_normal((batch, 3, 5, 8)).astype(np.float32), "cos": cos, "sin": sin}
    check_op("RotaryEmbedding", inputs, {"num_heads": 3}, opset=23)


def test_onnx_rotary_per_token_caches_symbolic_batch() -> None:
    """A symbolic batch: the table ids b * S + s come from Range over the caches' shape."""
    cos, sin = _onnx_cache((2, 5), 4)
    inputs = {"x": RNG.standard_normal((2, 5, 2 * 8)).astype(np.float32), "cos": cos, "sin": sin}
    dim_params = {"x": ["b", "s", 16], "cos": ["b", "s", 4], "sin": ["b", "s", 4]}
    check_op("RotaryEmbedding", inputs, {"num_heads": 2}, opset=23, dim_params=dim_params)
