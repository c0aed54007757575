"""Run the exporters on a checkpoint, each in its own Python environment.

Why subprocesses and two interpreters: onnxruntime-genai 0.18.0's model builder imports model classes
that only transformers 5 has, while optimum-onnx 0.1.0 requires transformers 4.57 — one venv cannot
hold both (see requirements.txt and requirements-optimum.txt). Both get HF_HUB_OFFLINE=1 so a missing
local file fails instead of reaching for the hub. PyTorch's exporter (``dynamo_export.py``) runs in a
third venv (requirements-dynamo.txt), which can also run the whole generator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["export_dynamo", "export_genai", "export_optimum", "ExportError"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


class ExportError(RuntimeError):
    """An exporter exited non-zero; the message holds the command and the tail of its output."""


def _run(cmd: list[str], log: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), env.get("PYTHONPATH", "")])
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise ExportError(f"exporter failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _copy_tokenizer(hf_dir: Path, out: Path) -> None:
    """Put the checkpoint's own tokenizer files beside the model.

    The exporters re-save the tokenizer through their transformers version, which may rewrite
    tokenizer.json; the fixtures ship the trained original so every directory of a family encodes
    identically (the oracle checks this).
    """
    for name in _TOKENIZER_FILES:
        if (hf_dir / name).exists():
            shutil.copy2(hf_dir / name, out / name)


def export_genai(python: str, hf_dir: Path, out: Path, precision: str, cache: Path, log: Path) -> Path:
    """onnxruntime-genai model builder: ``-e cpu -p <precision>`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [python, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(out)]
    cmd += ["-p", precision, "-e", "cpu", "-c", str(cache)]
    _run(cmd, log)
    _copy_tokenizer(hf_dir, out)
    return out


def export_optimum(python: str, hf_dir: Path, out: Path, log: Path) -> Path:
    """optimum-onnx: ``optimum-cli export onnx --task text-generation-with-past`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cli = Path(python).parent / "optimum-cli"
    if not cli.exists():
        raise ExportError(f"optimum-cli not found beside {python} (expected {cli}); install requirements-optimum.txt")
    cmd = [str(cli), "export", "onnx", "--model", str(hf_dir), "--task", "text-generation-with-past", str(out)]
    _run(cmd, log)
    _copy_tokenizer(hf_dir, out)
    return out


def export_dynamo(python: str, hf_dir: Path, out: Path, log: Path) -> Path:
    """``torch.onnx.export(dynamo=True, opset_version=23)`` with a cache (model.onnx + model.onnx.data) and
    without (model_no_cache.onnx, sharing the data file), plus the checkpoint's config files."""
    out.mkdir(parents=True, exist_ok=True)
    for extra in ([], ["--no-cache"]):
        cmd = [python, "-m", "llm_fixtures.dynamo_export", "--model", str(hf_dir), "--out", str(out), *extra]
        _run(cmd, log.with_suffix(".no-cache.log" if extra else ".log"))
    for name in ("config.json", "generation_config.json"):
        shutil.copy2(hf_dir / name, out / name)
    _copy_tokenizer(hf_dir, out)
    return out
