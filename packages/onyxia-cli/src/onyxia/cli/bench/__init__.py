"""onyxia.cli.bench — benchmark support: synthetic, cached real-shaped model directories (Gemma 3, Llama,
Qwen2, Qwen3, Phi-3; `archs.py`).

Beside the LLM session (`onyxia.cli.llm`), not under it: it writes ONNX files with onnx and numpy only and
imports no onyxia runtime package, so models can be prepared on machines without a GPU (and without torch
or onnxruntime; onnxruntime is only needed to cross-check the 4-bit packing in tests).
"""

from onyxia.cli.bench.archs import ARCHS, arch_config
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.synth import SynthesizedModel, default_cache_dir, synthesize

__all__ = ["ARCHS", "DecoderConfig", "SynthesizedModel", "arch_config", "default_cache_dir", "synthesize"]
