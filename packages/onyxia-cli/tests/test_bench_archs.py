"""`onyxia bench --arch`: each family's tiny synthetic model is the onnxruntime-genai builder's graph (node for
node against the shared `<family>-tiny-genai` fixture), loads as a genai directory, and Onyxia's greedy ids
equal onnxruntime's. The full shapes are checked from their graphs, without writing weights."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from llm_cases import DATA
from onnx import helper

from onyxia.cli.bench import ARCHS, SynthesizedModel, arch_config, synthesize
from onyxia.cli.bench.decoder_graph import build_decoder_graph
from onyxia.cli.commands import bench as bench_command
from onyxia.cli.llm import resolve_model_dir

GENAI = ("llama", "qwen2", "qwen3", "phi3")
_BRANCHES = ("then_branch", "else_branch", "value")  # compared by what they hold, not their bytes


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SynthesizedModel]:
    root = tmp_path_factory.mktemp("archs")
    return {arch: synthesize(arch_config(arch, "tiny"), root / arch) for arch in GENAI}


def _node_key(node: onnx.NodeProto) -> tuple[Any, ...]:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in _BRANCHES}
    return node.name, node.domain, node.op_type, list(node.input), list(node.output), attrs


@pytest.mark.parametrize("arch", GENAI)
@pytest.mark.parametrize(("precision", "fixture"), [("fp32", "fp32"), ("q4", "int4")])
def test_tiny_graph_is_the_genai_builders_node_for_node(
    models: dict[str, SynthesizedModel], arch: str, precision: str, fixture: str
) -> None:
    ours = onnx.load(str(models[arch].models[precision]), load_external_data=False)
    theirs = onnx.load(str(DATA / f"{arch}-tiny-genai" / fixture / "model.onnx"), load_external_data=False)
    assert [_node_key(n) for n in ours.graph.node] == [_node_key(n) for n in theirs.graph.node]
    assert list(ours.graph.input) == list(theirs.graph.input)
    assert list(ours.graph.output) == list(theirs.graph.output)
    assert [(t.name, list(t.dims)) for t in ours.graph.initializer] == [
        (t.name, list(t.dims)) for t in theirs.graph.initializer
    ]


@pytest.mark.parametrize("arch", GENAI)
def test_onyxia_greedy_ids_equal_onnxruntime_on_each_tiny_family(
    models: dict[str, SynthesizedModel], arch: str
) -> None:
    import onnxruntime as ort

    from onyxia.cli.llm import LlmSession

    config, prompt, steps = arch_config(arch, "tiny"), [2, 282, 500, 685, 381, 766, 674, 338, 378], 5
    found = resolve_model_dir(models[arch].model_dir("fp32"))
    assert (found.layout, found.eos_token_ids) == ("genai", [1, 6])
    session = ort.InferenceSession(str(found.model_path), providers=["CPUExecutionProvider"])
    empty = np.zeros((1, config.num_key_value_heads, 0, config.head_dim), np.float32)
    past = {f"past_key_values.{n}.{p}": empty for n in range(config.num_hidden_layers) for p in ("key", "value")}
    ids, expected = prompt, []
    for _ in range(steps):
        total = len(prompt) + len(expected)
        feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, total), np.int64), **past}
        outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        assert np.isfinite(outputs["logits"]).all() and outputs["logits"].std() > 0.01
        expected.append(int(outputs["logits"][0, -1].argmax()))
        past = {name: outputs[name.replace("past_key_values", "present")] for name in past}
        ids = [expected[-1]]
    llm = LlmSession.from_pretrained(found.root, max_length=32)
    assert list(llm.generate_ids(prompt, steps)) == expected


def test_full_shapes_are_the_public_models() -> None:
    shapes = {
        arch: (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim)
        + (c.intermediate_size, c.vocab_size, c.tie_word_embeddings)
        for arch in ARCHS
        for c in [arch_config(arch, "full")]
    }
    assert shapes == {
        "gemma3": (640, 18, 4, 1, 256, 2048, 262144, True),
        "llama": (960, 32, 15, 5, 64, 2560, 49152, True),
        "qwen2": (896, 24, 14, 2, 64, 4864, 151936, True),
        "qwen3": (1024, 28, 16, 8, 128, 3072, 151936, True),
        "phi3": (3072, 4, 24, 8, 128, 8192, 200064, False),
    }
    phi3 = arch_config("phi3", "full")
    assert (phi3.rotary_dim, phi3.original_max_position_embeddings) == (96, 4096)
    q4 = build_decoder_graph(arch_config("qwen2", "full"), q4=True)
    ops = [n.op_type for n in q4.graph.node]
    assert ops.count("MatMulNBits") == 24 * 5 + 1 and ops.count("GatherBlockQuantized") == 1
    assert ops.count("Add") == 24  # the q/k/v biases, one per layer
    weights = {getattr(w, "name", None) or w.source.name: w for w in build_decoder_graph(phi3).weights}
    assert weights["model.embed_tokens.weight"].shape == (200064, 3072)
    assert weights["model.layers.0.attn.qkv_proj.MatMul.weight"].shape == (3072, (24 + 2 * 8) * 128)


def test_arch_list_of_the_command_is_the_tables() -> None:
    assert bench_command.ARCHS == ARCHS


def test_270m_size_with_another_arch_is_an_input_error(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("bench", "--arch", "qwen2", "--size", "270m")
    assert result.code == 2 and "--size 270m is Gemma 3's shape" in result.err
