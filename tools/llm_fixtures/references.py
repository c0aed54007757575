"""Second opinions recorded beside onnxruntime's: transformers (eager, float32) and onnxruntime-genai.

Why: onnxruntime on the exported graph is the oracle, but an exporter can be wrong (optimum's Gemma 2,
the builder dropping Mistral's window, Phi-3's LongRoPE switch). Recording how far each graph is from
transformers, and whether genai's own Generator agrees with the plain loop, lets a reader of a fixture
tell an exporter quirk from an engine bug.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .oracle import GreedyRun

__all__ = ["HfReference", "genai_greedy", "equal_before_eos"]


class HfReference:
    """The checkpoint in transformers, eager attention, float32; greedy by full recompute per step."""

    def __init__(self, hf_dir: Path) -> None:
        import torch
        import transformers

        self.torch = torch
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            str(hf_dir), dtype=torch.float32, attn_implementation="eager"
        ).eval()
        self.meta = {
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "dtype": "float32",
            "attn": "eager",
        }

    def _logits(self, ids: list[int]) -> np.ndarray:
        with self.torch.no_grad():
            out = self.model(self.torch.tensor([ids], dtype=self.torch.long), use_cache=False)
        return out.logits[0].float().numpy()

    def compare(self, prompt_ids: list[int], run: GreedyRun) -> dict[str, Any]:
        """Logit diffs along onnxruntime's own tokens (teacher-forced), and transformers' own greedy ids."""
        p = len(prompt_ids)
        forced = self._logits(prompt_ids + run.ids[:-1])
        assert run.prefill_logits is not None
        ort_prefill = run.prefill_logits
        hf_prefill = forced[:p][-len(ort_prefill) :]
        decode = [np.abs(forced[p - 1 + k] - run.step_logits[k]).max() for k in range(1, len(run.ids))]
        ids = list(prompt_ids)
        for _ in range(len(run.ids)):
            ids.append(int(np.argmax(self._logits(ids)[-1])))
        hf_ids = ids[p:]
        return {
            "prefill_max_abs_logit_diff": float(np.abs(hf_prefill - ort_prefill).max()),
            "decode_max_abs_logit_diff": float(max(decode)) if decode else 0.0,
            "decode_steps_compared": len(decode),
            "greedy_ids": hf_ids,
            "greedy_equal": hf_ids == run.ids,
        }


def genai_greedy(directory: Path, prompt_ids: list[int], new_tokens: int) -> list[int]:
    """onnxruntime-genai's Generator, greedy, exactly ``new_tokens`` (min_length = max_length)."""
    import onnxruntime_genai as og

    model = og.Model(str(directory))
    params = og.GeneratorParams(model)
    total = len(prompt_ids) + new_tokens
    params.set_search_options(do_sample=False, max_length=total, min_length=total)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt_ids)
    while not gen.is_done():
        gen.generate_next_token()
    return [int(t) for t in gen.get_sequence(0)[len(prompt_ids) :]]


def equal_before_eos(ours: list[int], theirs: list[int], eos: set[int]) -> bool:
    """True when both agree before onnxruntime's first EOS (min_length makes genai's Generator skip EOS)."""
    n = next((i for i, t in enumerate(ours) if t in eos), len(ours))
    return ours[:n] == theirs[:n]
