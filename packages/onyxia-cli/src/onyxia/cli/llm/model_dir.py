"""Find the ONNX file, configs and tokenizer of an LLM directory in any of the exporters' layouts.

- onnx-community (`config.json`, `onnx/model{,_q4,_fp16,_q4f16}.onnx`): `--precision` picks the file;
  by default the smallest present that the adapter can run (f16 files need `shader-f16`);
- onnxruntime-genai (`genai_config.json` + the decoder file it names);
- optimum `text-generation-with-past` (`config.json` + `model.onnx`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onyxia.cli.llm.config_files import (
    chat_template_of,
    check_chat_template,
    check_config,
    check_genai_config,
    check_tokenizer_config,
    read_json_object,
)
from onyxia.core import ModelLoadError

__all__ = ["PRECISIONS", "ModelDirectory", "resolve_model_dir"]

# precision -> file name under onnx/, and whether it needs shader-f16
PRECISIONS: dict[str, tuple[str, bool]] = {
    "q4f16": ("model_q4f16.onnx", True),
    "q4": ("model_q4.onnx", False),
    "fp16": ("model_fp16.onnx", True),
    "fp32": ("model.onnx", False),
}


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
            "(onnxruntime-genai) or model.onnx (optimum)"
        )
    _attach_tokenizer(found)
    return found


def _onnx_community(root: Path, precision: str | None, features: Collection[str]) -> ModelDirectory:
    present = {p: root / "onnx" / f for p, (f, _) in PRECISIONS.items() if (root / "onnx" / f).is_file()}
    if not present:
        names = ", ".join(f for f, _ in PRECISIONS.values())
        raise ModelLoadError(f"{root / 'onnx'}: none of {names} is present")
    if precision is None:
        runnable = [p for p in present if not PRECISIONS[p][1] or "shader-f16" in features]
        if not runnable:
            raise ModelLoadError(f"{root}: only {sorted(present)} present, and the adapter has no shader-f16")
        precision = min(runnable, key=lambda p: _size(present[p]))
    elif precision not in present:
        raise ModelLoadError(
            f"{root}: precision {precision} ({PRECISIONS[precision][0]}) is not present; found {sorted(present)}"
        )
    elif PRECISIONS[precision][1] and features and "shader-f16" not in features:
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
