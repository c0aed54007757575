"""The exporters' layouts a synthetic model is written in, one row each: the graph builder, where the files go.

- "onnx-community" (Gemma 3 as published): `onnx/model.onnx` and `onnx/model_q4.onnx` with `<file>_data`,
  config.json beside `onnx/`;
- "genai" (the onnxruntime-genai builder): one directory per precision (`fp32/`, `q4/`), each holding
  `model.onnx`, `model.onnx.data` and genai_config.json;
- "dynamo" (`torch.onnx.export(dynamo=True, opset_version=23)` saved with its weights as `model.onnx` +
  `model.onnx.data` beside the checkpoint's config.json; q4 is that file through onnxruntime's
  MatMulNBitsQuantizer): one directory per precision too, so each loads as a plain exported directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onyxia.cli.bench.archs import DYNAMO, layout_of
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.decoder_graph import DecoderGraph, build_decoder_graph
from onyxia.cli.bench.dynamo_graph import build_dynamo_graph
from onyxia.cli.bench.hf_files import checkpoint_config_json, config_json, genai_config_json, generation_config_json

__all__ = ["LAYOUTS", "PRECISIONS", "Layout", "layout_row"]

PRECISIONS = ("fp32", "q4")
_COMMUNITY_FILES = {"fp32": "model.onnx", "q4": "model_q4.onnx"}  # onnx-community names under onnx/


@dataclass(frozen=True)
class Layout:
    name: str
    build: Callable[[DecoderConfig, bool], DecoderGraph]  # (config, q4) -> graph without weights
    per_precision_dirs: bool  # <precision>/model.onnx, else onnx/<community name>
    data_suffix: str  # external data file: <model file><suffix>
    opset: int  # ai.onnx
    imports_contrib: bool  # com.microsoft 1 imported always (as those exporters do), else where a node uses it
    configs: Callable[[DecoderConfig, int], dict[str, Any]]  # (config, seed) -> JSON files beside the model

    def model_file(self, directory: Path, precision: str) -> Path:
        if self.per_precision_dirs:
            return directory / precision / "model.onnx"
        return directory / "onnx" / _COMMUNITY_FILES[precision]

    def file_dirs(self, directory: Path) -> list[Path]:
        """Where the JSON and tokenizer files go: each precision's directory, or the root."""
        return [directory / p for p in PRECISIONS] if self.per_precision_dirs else [directory]


def _hf(config: DecoderConfig, seed: int) -> dict[str, Any]:
    return {"config.json": config_json(config, seed), "generation_config.json": generation_config_json()}


def _checkpoint(config: DecoderConfig, seed: int) -> dict[str, Any]:
    return {"config.json": checkpoint_config_json(config, seed), "generation_config.json": generation_config_json()}


LAYOUTS = {
    "onnx-community": Layout("onnx-community", build_decoder_graph, False, "_data", 21, True, _hf),
    "genai": Layout(
        "genai", build_decoder_graph, True, ".data", 21, True, lambda c, _: {"genai_config.json": genai_config_json(c)}
    ),
    DYNAMO: Layout(DYNAMO, build_dynamo_graph, True, ".data", 23, False, _checkpoint),
}


def layout_row(config: DecoderConfig) -> Layout:
    return LAYOUTS[layout_of(config)]
