"""Find the ONNX file, configs and tokenizer of an LLM directory in any of the exporters' layouts.

- onnx-community (`config.json`, `onnx/model{,_q4,_fp16,_q4f16,_bnb4,_int8,_uint8}.onnx`, the files
  transformers.js' quantize script writes): `--precision` picks any row of `PRECISIONS`. By default the
  smallest present that the adapter can run (f16 files need `shader-f16`) among the `by_default` rows
  q4f16, q4, fp16, fp32; bnb4, int8 and uint8 only when none of those is present, even where they are
  smaller. Why: bnb4 is smaller than q4 only by keeping one scale per 64 weights instead of 32, and
  int8/uint8 stream twice q4's weight bytes per product plus a DynamicQuantizeLinear per activation (their
  files are smaller only because quantize_dynamic also quantizes the embedding table; gemma3-tiny: int8
  242 KB, bnb4 392 KB, q4 397 KB), so picking them by size would trade accuracy or decode speed for bytes;
- onnxruntime-genai (`genai_config.json` + the decoder file it names);
- optimum `text-generation-with-past` (`config.json` + `model.onnx`), and PyTorch's own exporter
  (`torch.onnx.export(dynamo=True)` saved as `model.onnx` + `model.onnx.data` beside the checkpoint's
  `config.json`): one layout, "optimum", since the session reads either graph by its input and output names.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from onyxia.cli.llm.config_files import (
    chat_template_of,
    check_chat_template,
    check_config,
    check_genai_config,
    check_tokenizer_config,
    read_json_object,
)
from onyxia.core import ModelLoadError

__all__ = ["PRECISIONS", "ModelDirectory", "Precision", "precision_help", "resolve_model_dir"]


class Precision(NamedTuple):
    file: str  # under onnx/
    needs_f16: bool  # the adapter feature shader-f16
    by_default: bool  # a candidate when --precision is not given (see the module docstring)


PRECISIONS: dict[str, Precision] = {
    "q4f16": Precision("model_q4f16.onnx", True, True),
    "q4": Precision("model_q4.onnx", False, True),
    "fp16": Precision("model_fp16.onnx", True, True),
    "fp32": Precision("model.onnx", False, True),
    "bnb4": Precision("model_bnb4.onnx", False, False),  # com.microsoft MatMulBnb4, NF4/FP4
    "int8": Precision("model_int8.onnx", False, False),  # DynamicQuantizeLinear + MatMulInteger, int8 weights
    "uint8": Precision("model_uint8.onnx", False, False),  # the same with uint8 weights
}


def precision_help() -> str:
    """The --precision help of `generate` and `chat`, from the table."""
    preferred = "/".join(p for p, row in PRECISIONS.items() if row.by_default)
    return f"which onnx/model_<precision>.onnx to run (default: the smallest present of {preferred} the adapter runs)"


@dataclass
class ModelDirectory:
    root: Path
    layout: str  # "onnx-community" | "genai" | "optimum"
    model_path: Path
    precision: str
    config: dict[str, Any] = field(default_factory=dict)
    generation_config: dict[str, Any] = field(default_factory=dict)
    tokenizer_path: Path | None = None
    tokenizer_config: dict[str, Any] = field(default_factory=dict)
    chat_template: str | None = None

    @property
    def eos_token_ids(self) -> list[int]:
        eos = self.generation_config.get("eos_token_id", self.config.get("eos_token_id", []))
        return [int(e) for e in (eos if isinstance(eos, list) else [eos])]

    @property
    def max_position_embeddings(self) -> int | None:
        value = self.config.get("max_position_embeddings") or self.config.get("context_length")
        return int(value) if value else None


def resolve_model_dir(root: str | Path, precision: str | None = None, features: Collection[str] = ()) -> ModelDirectory:
    """Inspect `root`; raise `ModelLoadError` saying what was found and what was expected."""
    root = Path(root)
    if not root.is_dir():
        raise ModelLoadError(f"{root}: not a directory; expected an LLM model directory")
    if precision is not None and precision not in PRECISIONS:
        raise ModelLoadError(f"--precision {precision!r} is unknown; choose one of {sorted(PRECISIONS)}")
    single = (root / "genai_config.json").is_file() or not (root / "onnx").is_dir()
    if single and precision is not None and (root / "model.onnx").is_file():
        raise ModelLoadError(
            f"{root}: this layout holds a single model file (model.onnx), so --precision {precision} does not apply"
        )
    if (root / "genai_config.json").is_file():
        found = _genai(root)
    elif (root / "onnx").is_dir():
        found = _onnx_community(root, precision, features)
    elif (root / "model.onnx").is_file():
        found = ModelDirectory(root, "optimum", root / "model.onnx", "as-exported", _json(root / "config.json"))
    else:
        raise ModelLoadError(
            f"{root}: no ONNX model found; expected onnx/model*.onnx (onnx-community), genai_config.json "
            "(onnxruntime-genai) or model.onnx (optimum, torch.onnx.export)"
        )
    _attach_tokenizer(found)
    return found


def _onnx_community(root: Path, precision: str | None, features: Collection[str]) -> ModelDirectory:
    present = {p: root / "onnx" / row.file for p, row in PRECISIONS.items() if (root / "onnx" / row.file).is_file()}
    if not present:
        names = ", ".join(row.file for row in PRECISIONS.values())
        raise ModelLoadError(f"{root / 'onnx'}: none of {names} is present")
    if precision is None:
        runnable = [p for p in present if not PRECISIONS[p].needs_f16 or "shader-f16" in features]
        if not runnable:
            raise ModelLoadError(f"{root}: only {sorted(present)} present, and the adapter has no shader-f16")
        precision = min(runnable, key=lambda p: (not PRECISIONS[p].by_default, _size(present[p])))
    elif precision not in present:
        raise ModelLoadError(
            f"{root}: precision {precision} ({PRECISIONS[precision].file}) is not present; found {sorted(present)}"
        )
    elif PRECISIONS[precision].needs_f16 and features and "shader-f16" not in features:
        raise ModelLoadError(f"precision {precision} needs the adapter feature shader-f16, which this adapter lacks")
    config = _json(root / "config.json")
    return ModelDirectory(
        root, "onnx-community", present[precision], precision, config, _json(root / "generation_config.json")
    )


def _genai(root: Path) -> ModelDirectory:
    genai = _json(root / "genai_config.json")
    check_genai_config(genai, root / "genai_config.json")
    model = genai.get("model", {})
    decoder = model.get("decoder", {})
    path = root / decoder.get("filename", "model.onnx")
    if not path.is_file():
        raise ModelLoadError(f"{root / 'genai_config.json'} names decoder file {path.name}, which does not exist")
    config = {
        "eos_token_id": model.get("eos_token_id"),
        "bos_token_id": model.get("bos_token_id"),
        "context_length": model.get("context_length"),
        "sliding_window": (decoder.get("sliding_window") or {}).get("window_size"),
        "genai": genai,
    }
    return ModelDirectory(root, "genai", path, "as-exported", config)


def _attach_tokenizer(found: ModelDirectory) -> None:
    tokenizer = found.root / "tokenizer.json"
    found.tokenizer_path = tokenizer if tokenizer.is_file() else None
    config_file = found.root / "tokenizer_config.json"
    found.tokenizer_config = _json(config_file)
    check_tokenizer_config(found.tokenizer_config, config_file)
    template_file = found.root / "chat_template.jinja"
    if template_file.is_file():
        try:
            found.chat_template = template_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ModelLoadError(f"{template_file}: cannot be read as UTF-8 text ({e})") from e
        where = str(template_file)
    else:
        found.chat_template = chat_template_of(found.tokenizer_config, config_file)
        where = f"{config_file} (key chat_template)"
    if found.chat_template:
        check_chat_template(found.chat_template, where)
    if not found.generation_config:
        found.generation_config = _json(found.root / "generation_config.json")
    if found.layout != "genai":
        check_config(found.config, found.root / "config.json")
    check_config(found.generation_config, found.root / "generation_config.json")


def _json(path: Path) -> dict[str, Any]:
    return read_json_object(path)


def _size(model: Path) -> int:
    data = [p for p in model.parent.glob(model.name + "*") if p.is_file()]
    return sum(p.stat().st_size for p in data)
