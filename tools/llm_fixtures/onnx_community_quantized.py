"""onnx-community's quantized files (``onnx/model_<precision>.onnx``) made from a directory's fp32
``onnx/model.onnx`` by the quantizers transformers.js' ``scripts/quantize.py`` runs, then onnxruntime's
greedy outputs for them in ``expected_<precision>.json``.

Why a module apart from the exporter pipeline (``generate.py``): these files are not exports but
post-processing of an existing fp32 file, and only onnxruntime and onnx are needed, so the repository's
own ``.venv`` runs it. The prompts are the directory's ``expected_fp32.json`` prompts (same ids), so
every precision of one directory is checked on the same inputs.

Table-driven: `QUANTIZERS` maps a precision to the function that turns the loaded fp32 ModelProto into
the quantized one, with the settings transformers.js uses:
- ``bnb4``: ``MatMulBnb4Quantizer(model, block_size=64, quant_type=NF4)`` (quantize.py's defaults: its
  ``--block_size`` falls back to 64 for bnb4, ``--quant_type`` to NF4). Every MatMul with a 2-D
  initializer weight becomes com.microsoft MatMulBnb4; a tied LM head (MatMul by a Transpose) stays.
- ``int8`` / ``uint8``: quantize.py's ``quantize_q8`` with QInt8 / QUInt8 weights, through
  ``onnxruntime.quantization.quantize_dynamic`` (per tensor, full range, every IntegerOps op type,
  EnableSubgraph, MatMulConstBOnly; see `_DYNAMIC`): DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul per
  projection, and the embedding table quantized (uint8 Gather + DequantizeLinear, also under the tied LM head).

Run from ``tools/``: ``../.venv/bin/python -m llm_fixtures.onnx_community_quantized
../packages/onyxia-cli/tests/data/gemma3-tiny --precisions bnb4``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

from .oracle import Prompt, files_sha256, greedy, open_session, prompt_record

__all__ = ["QUANTIZERS", "main", "quantize", "write_expected"]

_EXTERNAL_THRESHOLD = 1024  # bytes: the layout's other files keep smaller tensors inline


def _bnb4(model: onnx.ModelProto) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer

    quantizer = MatMulBnb4Quantizer(model, quant_type=MatMulBnb4Quantizer.NF4, block_size=64)
    quantizer.process()
    return quantizer.model.model


def _dynamic(weight_type: str) -> Callable[[onnx.ModelProto], onnx.ModelProto]:
    """quantize.py's ``quantize_q8`` (``int8``: QInt8 weights, ``uint8``: QUInt8) through `quantize_dynamic`."""

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        import tempfile

        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "model.onnx")
            quantize_dynamic(model, out, use_external_data_format=True, **_DYNAMIC, weight_type=QuantType[weight_type])
            return onnx.load(str(out))

    return run


# quantize.py's ONNXQuantizer arguments (per_channel and reduce_range default to None, i.e. off; every op type of
# IntegerOpsRegistry, quantize_dynamic's default), plus DefaultTensorType: onnx's shape inference gives no type to
# the outputs of the layout's contrib ops, which onnxruntime 1.32's quantizer then refuses without it
_DYNAMIC: dict[str, Any] = {
    "per_channel": False,
    "reduce_range": False,
    "extra_options": {"EnableSubgraph": True, "MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
}

QUANTIZERS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "bnb4": _bnb4,
    "int8": _dynamic("QInt8"),
    "uint8": _dynamic("QUInt8"),
}
SETTINGS: dict[str, dict[str, Any]] = {
    "bnb4": {
        "quantizer": "onnxruntime.quantization.matmul_bnb4_quantizer.MatMulBnb4Quantizer",
        "block_size": 64,
        "quant_type": "NF4 (1)",
    },
    **{
        precision: {
            "quantizer": "onnxruntime.quantization.quantize_dynamic",
            "weight_type": weight_type,
            "activation_type": "QUInt8 (DynamicQuantizeLinear)",
            **{k: v for k, v in _DYNAMIC.items() if k != "extra_options"},
            "extra_options": {"EnableSubgraph": True, "MatMulConstBOnly": True, "DefaultTensorType": "FLOAT (1)"},
        }
        for precision, weight_type in (("int8", "QInt8"), ("uint8", "QUInt8"))
    },
}


def quantize(directory: Path, precision: str) -> Path:
    """Write ``onnx/model_<precision>.onnx`` + ``_data`` beside the fp32 file; return the model path."""
    model = onnx.load(str(directory / "onnx" / "model.onnx"))  # external data loaded
    quantized = QUANTIZERS[precision](model)
    path = directory / "onnx" / f"model_{precision}.onnx"
    data = path.with_name(path.name + "_data")
    data.unlink(missing_ok=True)  # onnx appends to an existing data file
    onnx.save_model(
        quantized,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data.name,
        size_threshold=_EXTERNAL_THRESHOLD,
    )
    return path


def write_expected(directory: Path, precision: str) -> Path:
    """onnxruntime's greedy run of ``model_<precision>.onnx`` on the fp32 file's prompts."""
    import onnxruntime as ort

    reference = json.loads((directory / "expected_fp32.json").read_text())
    config = json.loads((directory / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    name = f"onnx/model_{precision}.onnx"
    session = open_session(directory / name)
    records = []
    for recorded in reference["prompts"]:
        prompt = Prompt(recorded["name"], recorded["text"], recorded["truncate_to"], recorded["prompt_ids"])
        run = greedy(session, prompt.ids, reference["new_tokens"], config["num_key_value_heads"], head_dim, {})
        records.append(prompt_record(prompt, run))
    doc: dict[str, Any] = {
        "model_file": name,
        "files_sha256": files_sha256(directory, [name, name + "_data"]),
        "precision": precision,
        "io_dtype": "float32",
        "onnxruntime_version": ort.__version__,
        "execution_provider": "CPUExecutionProvider",
        "matmulnbits_accuracy_level_override": None,
        "sliding_window": reference.get("sliding_window"),
        "new_tokens": reference["new_tokens"],
        "stop_at_eos": False,
        "prompts": records,
        "quantization": {
            **SETTINGS[precision],
            "onnxruntime_version": ort.__version__,
            "onnx_version": onnx.__version__,
        },
    }
    path = directory / f"expected_{precision}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="an onnx-community directory holding onnx/model.onnx")
    parser.add_argument("--precisions", default=",".join(QUANTIZERS), help=f"comma-separated: {', '.join(QUANTIZERS)}")
    args = parser.parse_args(argv)
    for precision in args.precisions.split(","):
        if precision not in QUANTIZERS:
            parser.error(f"--precisions: unknown {precision!r}; expected one of {', '.join(QUANTIZERS)}")
        print(f"{precision}: {quantize(args.directory, precision)}")
        print(f"{precision}: {write_expected(args.directory, precision)}")


if __name__ == "__main__":
    main()
