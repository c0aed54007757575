"""The benchmark model synthesizer: tiny models equal the onnx-community fixture in structure, run, and cache.

The 270m model is never written here (about 1 GB); its graph is built without weights instead.
"""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from llm_cases import DATA
from onnx import helper, numpy_helper

from onyxia.cli.bench import DecoderConfig, synthesize
from onyxia.cli.bench.config import FULL, SLIDING
from onyxia.cli.bench.decoder_graph import build_decoder_graph
from onyxia.cli.bench.graph_builder import WeightSpec
from onyxia.cli.bench.quantize import dequantize_q4_symmetric, quantize_q4_symmetric
from onyxia.cli.bench.synth import MANIFEST, SynthesizedModel
from onyxia.cli.bench.weights import weight_array
from onyxia.cli.llm import resolve_model_dir

FIXTURE = DATA / "gemma3-tiny" / "onnx"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedModel:
    return synthesize(DecoderConfig.tiny(), tmp_path_factory.mktemp("synth") / "gemma3-tiny")


def _load(path: Path, data: bool = False) -> onnx.ModelProto:
    return onnx.load(str(path), load_external_data=data)


def _histogram(model: onnx.ModelProto) -> Counter:
    return Counter((node.domain or "ai.onnx", node.op_type) for node in model.graph.node)


def _initializer_layout(model: onnx.ModelProto) -> list[tuple]:
    """Name, dtype, dims and where the bytes live (inline, or file/offset/length)."""
    return [
        (t.name, t.data_type, list(t.dims), [(e.key, e.value) for e in t.external_data])
        for t in model.graph.initializer
    ]


def _attrs(model: onnx.ModelProto, op_type: str) -> list[dict]:
    return [
        {a.name: helper.get_attribute_value(a) for a in n.attribute} for n in model.graph.node if n.op_type == op_type
    ]


@pytest.mark.parametrize(("precision", "fixture"), [("fp32", "model.onnx"), ("q4", "model_q4.onnx")])
def test_tiny_graph_equals_the_fixture_node_for_node(tiny: SynthesizedModel, precision: str, fixture: str) -> None:
    ours, theirs = _load(tiny.models[precision]), _load(FIXTURE / fixture)
    assert len(ours.graph.node) == len(theirs.graph.node) == 71
    assert _histogram(ours) == _histogram(theirs)
    for mine, reference in zip(ours.graph.node, theirs.graph.node):
        assert mine == reference, f"node {reference.name!r} differs"
    assert list(ours.graph.input) == list(theirs.graph.input)
    assert list(ours.graph.output) == list(theirs.graph.output)
    assert _initializer_layout(ours) == _initializer_layout(theirs)  # same order, inlining and offsets
    assert (ours.ir_version, list(ours.opset_import)) == (theirs.ir_version, list(theirs.opset_import))
    for op_type in ("GroupQueryAttention", "RotaryEmbedding", "SimplifiedLayerNormalization"):
        assert _attrs(ours, op_type) == _attrs(theirs, op_type)


def test_tiny_q4_histogram_replaces_all_matmuls_but_the_lm_head(tiny: SynthesizedModel) -> None:
    fp32, q4 = _histogram(_load(tiny.models["fp32"])), _histogram(_load(tiny.models["q4"]))
    assert q4 == _histogram(_load(FIXTURE / "model_q4.onnx"))
    assert (q4[("ai.onnx", "MatMul")], q4[("com.microsoft", "MatMulNBits")]) == (1, fp32[("ai.onnx", "MatMul")] - 1)


def test_q4_file_equals_onnxruntime_quantizer_output_byte_for_byte(tiny: SynthesizedModel) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(
        _load(tiny.models["fp32"], data=True), bits=4, block_size=32, is_symmetric=True, accuracy_level=4
    )
    quantizer.process()
    expected, ours = quantizer.model.model, _load(tiny.models["q4"], data=True)
    assert list(ours.graph.node) == list(expected.graph.node)
    assert [t.name for t in ours.graph.initializer] == [t.name for t in expected.graph.initializer]
    for mine, reference in zip(ours.graph.initializer, expected.graph.initializer):
        a, b = numpy_helper.to_array(mine), numpy_helper.to_array(reference)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), mine.name


@pytest.mark.parametrize("case", ["normal", "half-steps", "zero-block"])
def test_packing_equals_mlas_including_rounding_ties(case: str) -> None:
    from onnxruntime.capi._pybind_state import quantize_matmul_4bits

    rng = np.random.default_rng(3)
    weight = (rng.standard_normal((96, 40)) * 0.02).astype(np.float32)
    if case == "half-steps":  # w / scale lands on x.5: roundf rounds away from zero, numpy's round would not
        weight = (rng.integers(-16, 17, weight.shape) / 2).astype(np.float32)
    if case == "zero-block":
        weight[32:64, :5] = 0
    packed, scales = quantize_q4_symmetric(weight)
    expected_packed, expected_scales = np.zeros((40, 3, 16), np.uint8), np.zeros((40, 3), np.float32)
    quantize_matmul_4bits(expected_packed, weight, expected_scales, np.zeros((40, 2), np.uint8), 32, 40, 96, True)
    np.testing.assert_array_equal(packed, expected_packed)
    np.testing.assert_array_equal(scales, expected_scales)
    assert np.abs(dequantize_q4_symmetric(packed, scales) - weight).max() <= np.abs(scales).max() * 1.0001


def _prefill_feeds(config: DecoderConfig, ids: list[int]) -> dict[str, np.ndarray]:
    n = len(ids)
    feeds = {
        "input_ids": np.array([ids], np.int64),
        "attention_mask": np.ones((1, n), np.int64),
        "position_ids": np.arange(n, dtype=np.int64)[None],
    }
    empty = np.zeros((1, config.num_key_value_heads, 0, config.head_dim), np.float32)
    for layer in range(config.num_hidden_layers):
        feeds |= {f"past_key_values.{layer}.key": empty, f"past_key_values.{layer}.value": empty}
    return feeds


def test_onnxruntime_prefills_both_precisions_with_finite_logits(tiny: SynthesizedModel) -> None:
    import onnxruntime as ort

    config, ids = DecoderConfig.tiny(), [2, 17, 300, 45, 999, 6, 5, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92]
    logits = {}
    for precision, path in tiny.models.items():
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outputs = session.run(None, _prefill_feeds(config, ids))
        assert outputs[0].shape == (1, len(ids), config.vocab_size) and np.isfinite(outputs[0]).all()
        assert outputs[1].shape == (1, 1, len(ids), config.head_dim)  # present.0.key
        logits[precision] = outputs[0]
    assert logits["fp32"].std() > 0.01  # not a degenerate (constant) model
    assert np.abs(logits["q4"] - logits["fp32"]).max() < 0.5 * np.abs(logits["fp32"]).max()


def test_onyxia_greedy_decoding_equals_onnxruntime(tiny: SynthesizedModel) -> None:
    import onnxruntime as ort

    from onyxia.cli.llm import LlmSession

    config, prompt = DecoderConfig.tiny(), [2, 282, 500, 685, 381, 766, 674, 338, 378]
    session = ort.InferenceSession(str(tiny.models["fp32"]), providers=["CPUExecutionProvider"])
    feeds, expected = _prefill_feeds(config, prompt), []
    for step in range(6):
        outputs = session.run(None, feeds)
        expected.append(int(outputs[0][0, -1].argmax()))
        total = len(prompt) + step + 1
        feeds = {
            "input_ids": np.array([[expected[-1]]], np.int64),
            "attention_mask": np.ones((1, total), np.int64),
            "position_ids": np.array([[total - 1]], np.int64),
        } | {name: value for name, value in zip([o.name for o in session.get_outputs()][1:], outputs[1:])}
        feeds = {k.replace("present.", "past_key_values."): v for k, v in feeds.items()}
    llm = LlmSession.from_pretrained(tiny.directory, "fp32", max_length=32)
    assert list(llm.generate_ids(prompt, 6)) == expected


def test_rope_caches_and_weights_are_what_the_config_says(tiny: SynthesizedModel) -> None:
    ours = {t.name: numpy_helper.to_array(t) for t in _load(tiny.models["fp32"], data=True).graph.initializer}
    theirs = {t.name: numpy_helper.to_array(t) for t in _load(FIXTURE / "model.onnx", data=True).graph.initializer}
    for name in ("cos_cache_global", "sin_cache_global", "cos_cache_local", "sin_cache_local"):
        np.testing.assert_allclose(ours[name], theirs[name], atol=1e-4)  # the fixture's angles are float32
    assert 0.9 < ours["model.norm.weight"].mean() < 1.1  # norms hold 1 + w
    assert 0.015 < ours["model.embed_tokens.weight"].std() < 0.025
    spec = WeightSpec("model.layers.0.mlp.up_proj.MatMul.weight", (64, 128), "linear")
    np.testing.assert_array_equal(ours[spec.name], weight_array(spec, seed=0))
    assert not np.array_equal(weight_array(spec, seed=0), weight_array(spec, seed=1))


def test_directory_loads_as_an_onnx_community_model_with_tokenizer(tiny: SynthesizedModel) -> None:
    from tokenizers import Tokenizer

    found = resolve_model_dir(tiny.directory, "q4")
    assert (found.layout, found.model_path, found.eos_token_ids) == ("onnx-community", tiny.models["q4"], [1, 6])
    assert found.config["layer_types"] == [SLIDING, FULL] and found.config["query_pre_attn_scalar"] == 32
    tokenizer = Tokenizer.from_file(str(found.tokenizer_path))
    assert tokenizer.get_vocab_size() == 1024
    assert [tokenizer.id_to_token(i) for i in range(7)] == [
        "<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"
    ]  # fmt: skip
    text = "Hello world, naïve ☃\n<start_of_turn>"
    ids = tokenizer.encode(text).ids
    assert ids[0] == 2 and ids[-1] == 5 and tokenizer.decode(ids) == text.removesuffix("<start_of_turn>")
    assert "<start_of_turn>model\n" in found.chat_template


def test_manifest_skips_a_second_write_and_redoes_only_what_changed(tmp_path: Path) -> None:
    config = DecoderConfig.tiny()
    first = synthesize(config, tmp_path, precisions=("fp32",))
    assert first.written == ("files", "fp32")
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    again = synthesize(config, tmp_path, precisions=("fp32",))
    assert again.written == () and again.models == first.models
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == stamps
    assert synthesize(config, tmp_path, precisions=("fp32", "q4")).written == ("q4",)
    (tmp_path / "onnx" / "model_q4.onnx_data").write_bytes(b"truncated")
    assert synthesize(config, tmp_path).written == ("q4",)
    assert synthesize(config, tmp_path, seed=1).written == ("files", "fp32", "q4")
    assert json.loads((tmp_path / MANIFEST).read_text())["seed"] == 1


def test_270m_graph_has_gemma3_270m_shapes_without_writing_weights() -> None:
    config = DecoderConfig.gemma3_270m()
    full = [i for i, kind in enumerate(config.layer_types) if kind == FULL]
    assert full == [5, 11, 17] and config.attention_scale == 1 / 16
    built = build_decoder_graph(config, q4=True)
    nodes = built.graph.node
    assert len(nodes) == 71 + 16 * 24 and sum(n.op_type == "MatMulNBits" for n in nodes) == 18 * 7
    windows = [a["local_window_size"] for a in _attrs(onnx.helper.make_model(built.graph), "GroupQueryAttention")]
    assert windows == [-1 if kind == FULL else 512 for kind in config.layer_types]
    assert "/model/constants/INT64/[0,-1,1024]" in {n.name for n in nodes}
    sizes = {w.name: w.shape for w in build_decoder_graph(config).weights}
    assert sizes["model.embed_tokens.weight"] == (262144, 640) and sizes["cos_cache_local"] == (4096, 128)
    assert sum(int(np.prod(s)) for s in sizes.values()) == 268_098_176 + 4 * 4096 * 128
    logits = next(o for o in built.graph.output if o.name == "logits").type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in logits] == ["batch_size", "sequence_length", 262144]
