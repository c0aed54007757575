"""LLM inference: model directories, tokenizer and chat template, sampling, and `LlmSession`."""

from onyxia.cli.llm.model_dir import PRECISIONS, ModelDirectory, resolve_model_dir
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.session import GenerationStats, LlmSession

__all__ = ["PRECISIONS", "GenerationStats", "LlmSession", "ModelDirectory", "SamplingParams", "resolve_model_dir"]
