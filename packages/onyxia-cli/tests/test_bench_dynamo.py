"""`onyxia bench --layout dynamo`: the synthesized graph is what torch.onnx.export(dynamo=True, opset 23) writes.

Against the real exports (`<family>-tiny-dynamo` fixtures, torch 2.13): the same op multiset in every layer
(layers told apart by the exporter's name_scopes metadata, which the synthesizer writes too), the same node
sequence with the same attributes and the same wiring, the same inputs and outputs; the q4 file is the fp32
one through onnxruntime's MatMulNBitsQuantizer; Onyxia's greedy ids and prefill logits equal onnxruntime's
on the synthesized files, and in a tiny `onyxia bench --layout dynamo` run; the command refuses a layout a
family is not synthesized in.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from llm_cases import DATA
from onnx import TensorProto, helper, numpy_helper

from onyxia.cli.bench import SynthesizedModel, arch_config, synthesize
from onyxia.cli.bench.graph_builder import WeightSpec
from onyxia.cli.bench.layouts import layout_row
from onyxia.core.settings import override

DYNAMO_ARCHS = ("gemma3", "llama", "qwen2", "qwen3")
_SCOPE = re.compile(r"layers\.(\d+)'")
_PROMPT = [2, 282, 500, 685, 381, 766, 674, 338, 378]


def _fixture(arch: str) -> onnx.ModelProto:
    return onnx.load(str(DATA / f"{arch}-tiny-dynamo" / "model.onnx"), load_external_data=False)


def _synthesized(arch: str) -> onnx.GraphProto:
    """The graph with its weights as dims-only initializers (their bytes are written by `synthesize`)."""
    config = arch_config(arch, "tiny", "dynamo")
    built = layout_row(config).build(config, False)
    for spec in built.weights:
        assert isinstance(spec, WeightSpec)
        built.graph.initializer.append(_dims_only(spec))
    return built.graph


def _dims_only(spec: WeightSpec) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=spec.name, data_type=TensorProto.FLOAT)
    tensor.dims.extend(spec.shape)
    return tensor


def _per_layer_ops(graph: onnx.GraphProto) -> dict[int | None, Counter[str]]:
    layers: dict[int | None, Counter[str]] = {}
    for node in graph.node:
        scopes = [p.value for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"]
        match = _SCOPE.search(scopes[0]) if scopes else None
        layers.setdefault(int(match.group(1)) if match else None, Counter())[node.op_type] += 1
    return layers


def _wiring(graph: onnx.GraphProto) -> list[tuple[Any, ...]]:
    """Each node's op, attributes and inputs by where they come from (node index and output, graph input,
    or an initializer by dims), so two graphs compare whatever their value names."""
    produced = {out: (i, k) for i, node in enumerate(graph.node) for k, out in enumerate(node.output)}
    initializers = {t.name: (t.data_type, tuple(t.dims)) for t in graph.initializer}
    inputs = {i.name for i in graph.input}
    rows = []
    for node in graph.node:
        sources = [
            ("node", *produced[name]) if name in produced else ("input", name) if name in inputs else initializers[name]
            for name in node.input
        ]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        rows.append((node.op_type, attrs, sources))
    return rows


@pytest.mark.parametrize("arch", DYNAMO_ARCHS)
def test_every_layer_has_the_real_exports_op_multiset(arch: str) -> None:
    ours, theirs = _per_layer_ops(_synthesized(arch)), _per_layer_ops(_fixture(arch).graph)
    assert set(ours) == set(theirs) == {None, 0, 1}
    for layer in (0, 1):
        assert ours[layer] == theirs[layer], f"layer {layer}"
    assert sum(ours.values(), Counter()) == sum(theirs.values(), Counter())
    assert (ours[0]["Attention"], ours[0]["RotaryEmbedding"], ours[0]["Cos"]) == (1, 2, 2)


@pytest.mark.parametrize("arch", DYNAMO_ARCHS)
def test_graph_is_the_real_export_node_for_node(arch: str) -> None:
    ours, theirs = _synthesized(arch), _fixture(arch).graph
    assert _wiring(ours) == _wiring(theirs)
    assert [(i.name, i.type) for i in ours.input] == [(i.name, i.type) for i in theirs.input]
    assert [(o.name, o.type) for o in ours.output] == [(o.name, o.type) for o in theirs.output]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SynthesizedModel]:
    root = tmp_path_factory.mktemp("dynamo")
    return {arch: synthesize(arch_config(arch, "tiny", "dynamo"), root / arch) for arch in DYNAMO_ARCHS}


def test_q4_file_is_the_fp32_export_through_onnxruntimes_quantizer(models: dict[str, SynthesizedModel]) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = models["qwen2"]
    fp32 = onnx.load(str(model.models["fp32"]))
    quantizer = MatMulNBitsQuantizer(fp32, bits=4, block_size=32, is_symmetric=True, accuracy_level=4)
    quantizer.process()
    expected, ours = quantizer.model.model, onnx.load(str(model.models["q4"]))
    assert list(ours.graph.node) == list(expected.graph.node)
    assert [t.name for t in ours.graph.initializer] == [t.name for t in expected.graph.initializer]
    for mine, reference in zip(ours.graph.initializer, expected.graph.initializer):
        a, b = numpy_helper.to_array(mine), numpy_helper.to_array(reference)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), mine.name
    assert Counter(n.op_type for n in ours.graph.node)["MatMulNBits"] == 2 * 7  # the tied head stays a MatMul


def _onnxruntime_greedy(path: str, arch: str, steps: int) -> tuple[list[int], np.ndarray]:
    """Greedy ids the plain past/present loop gets, and the prefill's last logits."""
    import onnxruntime as ort

    config = arch_config(arch, "tiny", "dynamo")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    empty = np.zeros((1, config.num_key_value_heads, 0, config.head_dim), np.float32)
    past = {f"past_key_values.{n}.{p}": empty for n in range(config.num_hidden_layers) for p in ("key", "value")}
    ids, expected, length, prefill = _PROMPT, [], 0, np.empty(0)
    for _ in range(steps):
        total = length + len(ids)
        feeds = {
            "input_ids": np.array([ids], np.int64),
            "attention_mask": np.ones((1, total), np.int64),
            "position_ids": np.arange(length, total, dtype=np.int64)[None],
        }
        outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds | past)))
        prefill = outputs["logits"][0, -1] if not expected else prefill
        expected.append(int(outputs["logits"][0, -1].argmax()))
        past = {name: outputs[name.replace("past_key_values", "present")] for name in past}
        ids, length = [expected[-1]], total
    return expected, prefill


@pytest.mark.parametrize(("arch", "precision"), [(a, "fp32") for a in DYNAMO_ARCHS] + [("qwen2", "q4")])
def test_onyxia_equals_onnxruntime_on_the_synthesized_export(
    models: dict[str, SynthesizedModel], arch: str, precision: str
) -> None:
    from onyxia.cli.llm import LlmSession, resolve_model_dir

    found = resolve_model_dir(models[arch].model_dir(precision))
    assert (found.layout, found.eos_token_ids) == ("optimum", [1, 6])  # torch.onnx's directory: no precisions
    expected, prefill = _onnxruntime_greedy(str(found.model_path), arch, steps=6)
    assert prefill.std() > 0.01  # not a degenerate (constant) model
    llm = LlmSession.from_pretrained(found.root, max_length=32)
    assert list(llm.generate_ids(_PROMPT, 6)) == expected
    llm.reset()
    np.testing.assert_allclose(llm.next_token_logits(_PROMPT), prefill, atol=1e-4, rtol=0)


def test_bench_runs_the_dynamo_layout_and_the_engines_agree(tmp_path: Path) -> None:
    from onyxia.cli import main

    out = tmp_path / "bench.json"
    with override(cache_dir=tmp_path / "cache"):
        argv = ["bench", "--arch", "qwen2", "--size", "tiny", "--layout", "dynamo", "--precision", "fp32"]
        code = main([*argv, "--engines", "onyxia,ort-cpu", "--json", str(out), "--prompt-tokens", "8"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["settings"]["layout"] == "dynamo" and report["model"]["config"]["layout"] == "dynamo"
    assert report["model"]["directory"].endswith("qwen2-tiny-dynamo-synthetic")
    engines = report["precisions"]["fp32"]["engines"]
    assert engines["onyxia"]["status"] == engines["ort-cpu"]["status"] == "ok", engines
    assert engines["onyxia"]["tokens"] == engines["ort-cpu"]["tokens"] and engines["onyxia"]["decode_tok_s"] > 0


@pytest.mark.parametrize(
    ("arch", "layout", "message"),
    [
        ("phi3", "dynamo", "--arch phi3 is synthesized as genai"),
        ("gemma3", "genai", "--arch gemma3 is synthesized as onnx-community or dynamo"),
    ],
)
def test_a_layout_the_family_lacks_is_an_input_error(
    cli: Callable[..., Any], arch: str, layout: str, message: str
) -> None:
    result = cli("bench", "--arch", arch, "--layout", layout)
    assert result.code == 2 and message in result.err, result.err
