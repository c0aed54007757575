"""The transformers models, exported by `optimum-cli export onnx` from seeded random checkpoints.

Configs keep each family's topology and shrink its sizes (hidden 32-64, 2 layers, small vocabularies)
so every file stays well under 2 MB. Whisper is *tiny-shaped*: 80 mel bins, encoder and decoder
stacks with cross-attention, learned decoder positions, sinusoidal encoder positions; its frame
count is max_source_positions * 2 (Whisper's conv stem halves it), cut from 3000 to 128 so the
input stays small. optimum's `automatic-speech-recognition-with-past` task writes the encoder, the
decoder without and with past, and the merged decoder whose `If` picks the branch from the
`use_cache_branch` input.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["HF_CASES", "HfCase", "build_checkpoint", "export_optimum"]


@dataclass(frozen=True)
class HfCase:
    """A transformers model class, its config and the optimum task (plus optimum's dummy-shape flags)."""

    model_class: str
    config_class: str
    config: dict[str, object]
    task: str
    shape_args: tuple[str, ...] = ()


HF_CASES: dict[str, HfCase] = {
    "vit": HfCase(
        "ViTForImageClassification",
        "ViTConfig",
        dict(
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=96,
            num_labels=10,
        ),
        "image-classification",
    ),
    "bert": HfCase(
        "BertModel",
        "BertConfig",
        dict(
            vocab_size=1000,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=128,
            type_vocab_size=2,
        ),
        "feature-extraction",
    ),
    "whisper": HfCase(
        "WhisperForConditionalGeneration",
        "WhisperConfig",
        dict(
            vocab_size=512,
            num_mel_bins=80,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=256,
            decoder_ffn_dim=256,
            max_source_positions=64,
            max_target_positions=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            suppress_tokens=[],
            begin_suppress_tokens=None,
            forced_decoder_ids=None,
        ),
        "automatic-speech-recognition-with-past",
        ("--nb_max_frames", "128"),
    ),
}


def build_checkpoint(case: HfCase, seed: int, out: Path) -> Path:
    """Save a seeded random-weight checkpoint (config + safetensors) for optimum to load offline.

    transformers' own init draws LayerNorm weights of exactly 1 and biases of 0; those are nudged so a
    norm that dropped its affine part would show in the comparison.
    """
    import transformers

    torch.manual_seed(seed)
    config = getattr(transformers, case.config_class)(**case.config)
    model = getattr(transformers, case.model_class)(config).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.add_(torch.randn(module.weight.shape, generator=gen) * 0.1)
                module.bias.add_(torch.randn(module.bias.shape, generator=gen) * 0.1)
    model.save_pretrained(out)
    return out


def export_optimum(case: HfCase, checkpoint: Path, out: Path, log: Path) -> None:
    """`optimum-cli export onnx` offline (no hub access), opset and post-processing left at optimum's defaults."""
    exe = Path(sys.executable).parent / "optimum-cli"  # this venv's, not whatever PATH finds
    cmd = [str(exe), "export", "onnx", "--model", str(checkpoint)]
    cmd += ["--task", case.task, *case.shape_args, str(out)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise RuntimeError(f"optimum-cli failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
