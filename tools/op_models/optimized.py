"""The transformer files rewritten by `onnxruntime.transformers.optimizer.optimize_model`.

The offline optimizer fuses the exported subgraphs into com.microsoft contrib ops: the embedding
sum and its LayerNorm into EmbedLayerNormalization (BERT), residual Add + LayerNorm into
SkipLayerNormalization, Q/K/V MatMuls + softmax attention into Attention, and MatMul bias + Erf GELU
into BiasGelu (or FastGelu where `enable_gelu_approximation` swaps the erf GELU for the tanh one).
`only_onnxruntime=False` and `opt_level=0`: the Python fusions only, the file a user gets from
`python -m onnxruntime.transformers.optimizer` without `--opt_level`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onnxruntime.transformers.fusion_options import FusionOptions
from onnxruntime.transformers.optimizer import optimize_model

__all__ = ["OPT_CASES", "OptCase", "optimize"]


@dataclass(frozen=True)
class OptCase:
    base: str  # the fp32 file it is made from
    model_type: str
    num_heads: int
    hidden_size: int
    gelu_approximation: bool = False

    @property
    def tool(self) -> str:
        extra = ", enable_gelu_approximation" if self.gelu_approximation else ""
        return f"onnxruntime.transformers.optimizer (model_type={self.model_type}{extra})"


OPT_CASES: dict[str, OptCase] = {
    "bert_optimized": OptCase("bert", "bert", 4, 64),
    "bert_optimized_fastgelu": OptCase("bert", "bert", 4, 64, gelu_approximation=True),
    "vit_optimized": OptCase("vit", "vit", 4, 48),
}


def optimize(case: OptCase, fp32: Path, dst: Path) -> None:
    options = FusionOptions(case.model_type)
    options.enable_gelu_approximation = case.gelu_approximation
    model = optimize_model(
        str(fp32),
        model_type=case.model_type,
        num_heads=case.num_heads,
        hidden_size=case.hidden_size,
        optimization_options=options,
        opt_level=0,
    )
    model.save_model_to_file(str(dst))
