"""onyxia.cli.bench — benchmark support: a synthetic, cached Gemma-3-270m-shaped model directory.

Beside the LLM session (`onyxia.cli.llm`), not under it: it writes ONNX files with onnx and numpy only and
imports no onyxia runtime package, so models can be prepared on machines without a GPU (and without torch
or onnxruntime; onnxruntime is only needed to cross-check the 4-bit packing in tests).
"""

from onyxia.cli.bench.config import GemmaConfig
from onyxia.cli.bench.synth import SynthesizedModel, default_cache_dir, synthesize

__all__ = ["GemmaConfig", "SynthesizedModel", "default_cache_dir", "synthesize"]
