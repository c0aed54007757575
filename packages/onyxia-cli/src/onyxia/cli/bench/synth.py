"""Synthesize a real-shaped decoder model directory (seeded random weights), cached; Gemma 3 270m by default.

Benchmarks need a model with the real model's shapes, ops and file layout, but the real weights cannot be
downloaded everywhere. Gemma 3's directory is onnx-community's: `onnx/model.onnx` (fp32) and
`onnx/model_q4.onnx` (MatMulNBits), each with `<file>_data`, and the JSON/tokenizer files (`hf_files.py`).
The other families are onnxruntime-genai builder outputs, one directory per precision (`fp32/`, `q4/`),
each with `model.onnx`, `model.onnx.data`, `genai_config.json` and the tokenizer files; a config with
layout "dynamo" is torch.onnx's export, also one directory per precision (`layouts.py` has the rows). A manifest keyed on the config, the
seed and a hash of this package's code makes a second call with the same arguments free; a precision that
is missing or whose files changed size is rewritten, and the manifest is saved after every part, so an
interrupted run only redoes what it did not finish. Concurrent writers to one directory are not supported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.graph_builder import QuantizedWeightSpec, WeightSpec
from onyxia.cli.bench.hf_files import write_hf_files
from onyxia.cli.bench.layouts import PRECISIONS, layout_row
from onyxia.cli.bench.quantize import quantize_q4_symmetric
from onyxia.cli.bench.tensor_writer import ExternalDataWriter
from onyxia.cli.bench.weights import iter_weight_chunks, weight_array
from onyxia.core.settings import settings

__all__ = [
    "MANIFEST",
    "SYNTH_VERSION",
    "SynthesizedModel",
    "default_cache_dir",
    "model_file",
    "synthesize",
]

log = logging.getLogger(__name__)

SYNTH_VERSION = 1
MANIFEST = "onyxia_synth_manifest.json"
_IR_VERSION = 10
_SOURCES = (
    "archs",
    "config",
    "decoder_graph",
    "decoder_layer",
    "dynamo_builder",
    "dynamo_graph",
    "dynamo_layer",
    "graph_builder",
    "hf_files",
    "layouts",
    "quantize",
    "synth",
    "tensor_writer",
    "tokenizer_json",
    "weights",
)


@dataclass(frozen=True)
class SynthesizedModel:
    directory: Path  # the cache entry (onnx-community: also what `LlmSession.from_pretrained` takes)
    models: dict[str, Path]  # precision -> onnx file
    written: tuple[str, ...]  # parts ("files", "fp32", "q4") written by this call; () on a cache hit

    def model_dir(self, precision: str) -> Path:
        """The directory a session loads for `precision` (genai: the precision's own directory)."""
        model = self.models[precision]
        return model.parent.parent if model.parent.name == "onnx" else model.parent


def default_cache_dir(config: DecoderConfig) -> Path:
    """The `cache_dir` setting (``ONYXIA_CACHE_DIR``) or `~/.cache/onyxia`, then `bench/<name>-synthetic`."""
    root = settings().cache_dir or Path.home() / ".cache" / "onyxia"
    return root / "bench" / f"{config.name}-synthetic"


def synthesize(
    config: DecoderConfig | None = None,
    out_dir: str | Path | None = None,
    precisions: Sequence[str] = ("fp32", "q4"),
    seed: int = 0,
) -> SynthesizedModel:
    """Write (or find already written) the model directory for `config` (default: Gemma 3 270m)."""
    config = config or DecoderConfig.gemma3_270m()
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown:
        raise ValueError(f"unknown precisions {unknown}; choose from {sorted(PRECISIONS)}")
    directory = Path(out_dir) if out_dir is not None else default_cache_dir(config)
    for precision in PRECISIONS:
        model_file(config, directory, precision).parent.mkdir(parents=True, exist_ok=True)
    key = cache_key(config, seed)
    manifest = _read_manifest(directory)
    if manifest.get("key") != key:
        manifest = {"key": key, "version": SYNTH_VERSION, "seed": seed, "config": config.to_dict(), "files": {}}
    written = []
    for part in ("files", *dict.fromkeys(precisions)):
        if _is_complete(directory, manifest, part):
            continue
        manifest["files"].pop(part, None)  # a run killed while rewriting must not look complete
        _write_manifest(directory, manifest)
        started = time.perf_counter()
        paths = _write_part(config, directory, part, seed)
        manifest["files"][part] = {p.relative_to(directory).as_posix(): p.stat().st_size for p in paths}
        _write_manifest(directory, manifest)
        log.info("synthesized %s %s in %.1f s", config.name, part, time.perf_counter() - started)
        written.append(part)
    models = {p: model_file(config, directory, p) for p in precisions}
    return SynthesizedModel(directory, models, tuple(written))


def cache_key(config: DecoderConfig, seed: int) -> str:
    """Changes with the config, the seed, SYNTH_VERSION or any module the written files depend on."""
    digest = hashlib.sha256(json.dumps([SYNTH_VERSION, config.to_dict(), seed], sort_keys=True).encode())
    for source in sorted(_SOURCES):  # not the whole package: editing the bench runners keeps the cache
        digest.update((Path(__file__).parent / f"{source}.py").read_bytes())
    return digest.hexdigest()


def model_file(config: DecoderConfig, directory: Path, precision: str) -> Path:
    return layout_row(config).model_file(directory, precision)


def _write_part(config: DecoderConfig, directory: Path, part: str, seed: int) -> list[Path]:
    layout = layout_row(config)
    if part == "files":
        configs = layout.configs(config, seed)
        return [p for folder in layout.file_dirs(directory) for p in write_hf_files(config, folder, configs)]
    return _write_model(config, model_file(config, directory, part), part == "q4", seed)


def _write_model(config: DecoderConfig, path: Path, q4: bool, seed: int) -> list[Path]:
    """Initializers are streamed to `<file><suffix>` first; the graph proto then only holds references
    (and the small constants a layout stores inline)."""
    layout = layout_row(config)
    built = layout.build(config, q4)
    with ExternalDataWriter(path, layout.data_suffix) as writer:
        for spec in built.weights:
            built.graph.initializer.extend(_initializers(writer, spec, seed))
    opsets = [helper.make_opsetid("", layout.opset)]
    if layout.imports_contrib or any(node.domain == "com.microsoft" for node in built.graph.node):
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(built.graph, opset_imports=opsets, producer_name="onyxia-bench-synth")
    model.ir_version = _IR_VERSION
    onnx.save_model(model, path)
    return [path, writer.path]


def _initializers(
    writer: ExternalDataWriter, spec: WeightSpec | QuantizedWeightSpec, seed: int
) -> Iterator[onnx.TensorProto]:
    if isinstance(spec, WeightSpec):
        yield writer.tensor(spec.name, spec.shape, np.dtype(np.float32), iter_weight_chunks(spec, seed))
        return
    packed, scales = quantize_q4_symmetric(weight_array(spec.source, seed), spec.block_size)
    yield writer.tensor(spec.packed_name, packed.shape, np.dtype(np.uint8), [packed])
    yield writer.tensor(spec.scales_name, scales.shape, np.dtype(np.float32), [scales])


def _is_complete(directory: Path, manifest: dict[str, Any], part: str) -> bool:
    files = manifest["files"].get(part)
    if not files:
        return False
    return all(
        (directory / name).is_file() and (directory / name).stat().st_size == size for name, size in files.items()
    )


def _read_manifest(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {}


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Written beside and renamed over, so a crash never leaves a manifest that claims unwritten files."""
    temporary = directory / f"{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    temporary.replace(directory / MANIFEST)
