"""PyTorch's own exporter: ``torch.onnx.export(model, ..., dynamo=True, opset_version=23)``, with and without a cache.

How a PyTorch user gets past/present tensors out of a Hugging Face decoder: ``forward`` takes a
``DynamicCache``, which ``torch.export`` cannot take as a graph input without a pytree registration, so
the model is wrapped in a module whose inputs are plain tensors (``input_ids``, ``attention_mask``,
``position_ids``, then each layer's past key and value) and which builds the ``DynamicCache`` from them
and returns the logits and each layer's updated key and value. The names given to ``torch.onnx.export``
are optimum's (``past_key_values.N.key`` / ``present.N.key``), the names onnxruntime users feed, and so
are the dynamic dims: ``batch_size`` (several sequences per run, as a continuous-batching session feeds
them), ``sequence_length``, ``past_sequence_length``, ``total_sequence_length``. The model is loaded with
transformers' default attention (``sdpa``, which the exporter turns into ``ai.onnx::Attention``; Gemma 2
defaults to ``eager`` because sdpa cannot soft-cap, so its attention stays MatMul/Softmax). The cache's layers are plain ``DynamicLayer``s: sliding windows are applied by the
attention mask, so present = concat(past, new) on every layer.

The no-cache export (``--no-cache``) is the same wrapper without past inputs (``use_cache=False``), saved
as ``model_no_cache.onnx`` beside the cached one; its weights point into the cached export's
``model.onnx.data`` (same parameter names and bytes), so the directory holds one copy of them.

Run in the requirements-dynamo.txt venv: ``python -m llm_fixtures.dynamo_export --model HF --out DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["export", "main"]

DATA_FILE = "model.onnx.data"
OPSET = 23


def _wrapper(model: Any, cached: bool) -> Any:
    import torch
    from transformers import DynamicCache

    class Decoder(torch.nn.Module):
        """Plain tensors in and out: the DynamicCache is built and flattened inside ``forward``."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, *past: Any) -> Any:
            if not cached:
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                 use_cache=False)  # fmt: skip
                return out.logits
            cache = DynamicCache(ddp_cache_data=list(zip(past[0::2], past[1::2])))
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)  # fmt: skip
            flat = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *flat)

    return Decoder().eval()


def _example(config: Any, cached: bool) -> tuple[tuple[Any, ...], tuple[Any, ...], list[str], list[str]]:
    """Example inputs (a batch of 2, 3 new tokens after 5 cached: no dim is 0 or 1, so none is specialised),
    their dynamic dims (``batch_size`` too, as optimum's and genai's exports: a continuous-batching session
    runs several sequences per call), input and output names."""
    import torch

    layers = config.num_hidden_layers
    kv_heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    batch, new, past = 2, 3, 5 if cached else 0
    dim = torch.export.Dim
    rows = dim("batch_size")
    seq, past_len, total = dim("sequence_length"), dim("past_sequence_length"), dim("total_sequence_length")
    ids = torch.randint(0, config.vocab_size, (batch, new))
    mask = torch.ones(batch, past + new, dtype=torch.int64)
    pos = torch.arange(past, past + new)[None].expand(batch, new).contiguous()
    cache = tuple(torch.randn(batch, kv_heads, past, head_dim) for _ in range(2 * layers))
    names = [f"{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    if not cached:
        return (
            (ids, mask, pos),
            ({0: rows, 1: seq}, {0: rows, 1: seq}, {0: rows, 1: seq}),
            ["input_ids", "attention_mask", "position_ids"],
            ["logits"],
        )
    shapes = ({0: rows, 1: seq}, {0: rows, 1: total}, {0: rows, 1: seq}, tuple({0: rows, 2: past_len} for _ in cache))
    inputs = ["input_ids", "attention_mask", "position_ids", *(f"past_key_values.{n}" for n in names)]
    return (ids, mask, pos, *cache), shapes, inputs, ["logits", *(f"present.{n}" for n in names)]


def export(hf_dir: Path, out: Path, cached: bool) -> Path:
    """Export ``hf_dir`` into ``out`` (model.onnx + model.onnx.data, or model_no_cache.onnx)."""
    import onnx
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    args, shapes, inputs, outputs = _example(model.config, cached)
    with torch.no_grad():
        program = torch.onnx.export(
            _wrapper(model, cached), args, input_names=inputs, output_names=outputs, dynamic_shapes=shapes,
            dynamo=True, opset_version=OPSET, optimize=True, external_data=False,
        )  # fmt: skip
    proto = program.model_proto
    _drop_stack_traces(proto)
    out.mkdir(parents=True, exist_ok=True)
    if cached:
        path = out / "model.onnx"
        onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=DATA_FILE, size_threshold=1024)  # fmt: skip
        (out / DATA_FILE).chmod(0o644)  # onnx writes it 0600
        return path
    path = out / "model_no_cache.onnx"
    _share_weights(proto, out / "model.onnx")
    onnx.save_model(proto, str(path))
    return path


def _drop_stack_traces(proto: Any) -> None:
    """Remove each node's ``pkg.torch.onnx.stack_trace`` (the generator's file paths; 40% of the graph's
    bytes). The other metadata stays, ``pkg.torch.onnx.name_scopes`` among it (``model.layers.N``: the
    only place a node's layer is named, the node names being FX's)."""
    for node in proto.graph.node:
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)


def _share_weights(proto: Any, cached_model: Path) -> None:
    """Point every initializer equal (dtype and bytes) to one of ``cached_model``'s external tensors at it.

    By content, not name: the exporter's optimizer folds transposed weights into new constants whose
    names (``val_N``) differ between the two exports."""
    import onnx
    from onnx import external_data_helper as ext
    from onnx import numpy_helper

    if not cached_model.exists():
        raise FileNotFoundError(f"{cached_model}: export the cached model first (its {DATA_FILE} is shared)")
    cached = onnx.load(str(cached_model), load_external_data=False)
    data = (cached_model.parent / DATA_FILE).read_bytes()
    where = {}
    for t in cached.graph.initializer:
        if ext.uses_external_data(t):
            info = ext.ExternalDataInfo(t)
            where[(t.data_type, data[info.offset : info.offset + info.length])] = (info.offset, info.length)
    for t in proto.graph.initializer:
        raw = numpy_helper.to_array(t).tobytes()
        if (t.data_type, raw) not in where:
            continue
        offset, length = where[(t.data_type, raw)]
        for field in ("float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(field)
        t.raw_data = raw  # set_external_data wants the field present; cleared below
        ext.set_external_data(t, location=DATA_FILE, offset=offset, length=length)
        t.data_location = onnx.TensorProto.EXTERNAL
        t.ClearField("raw_data")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="llm_fixtures.dynamo_export", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="Hugging Face checkpoint directory")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--no-cache", action="store_true", help="export without past/present (model_no_cache.onnx)")
    args = p.parse_args(argv)
    print(export(args.model, args.out, cached=not args.no_cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
