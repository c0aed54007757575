"""``fold_add_into_MatMul``: a projection's constant bias Add folded into the product's epilogue.

``Add(MatMul(x, W), b)`` (either operand order; W a [K, N] weight `MatMulGroup` takes, b a constant [N] of x's
dtype) becomes ``MatMulGroup(x, W, b, bias=1)``, a biased group of one, which stores the product rounded as the
MatMul would and then adds b as the Add would, so no separate Add dispatch remains. Targets Qwen2's q/k/v
biases: onnxruntime-genai's fp32 builder adds one bias after the fused QKV MatMul, optimum three after the
q/k/v MatMuls, which `group_matmuls` (run after this rule) then groups into one biased MatMulGroup. The
MatMulNBits form is `onyxia.operators.quantized.fusions`' ``fold_add_into_MatMulNBits``.

Declines (reason logged, graph unchanged): a product MatMulGroup does not take (a runtime-shaped, non-2-D or
oversized weight), a bias that is not [N] of the product's dtype (a broadcast of another shape).
"""

from __future__ import annotations

from onyxia.core import IrGraph
from onyxia.core.rewrite import Const, Decline, Match, Rule, Var, op
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.matmul.fusions import weight_product

__all__ = ["FOLD_ADD_INTO_MATMUL", "bias_fits"]


def bias_fits(graph: IrGraph, bias: int, n: object, product: int) -> Decline | None:
    """`bias` is a 1-D [n] tensor of the dtype of `product`'s output."""
    b, y = graph.tensor(bias), graph.tensor(product)
    if list(b.dims) != [n] or b.dtype != y.dtype:
        return Decline(
            f"bias '{b.name}' is {b.dtype.name.lower()}{list(b.dims)}; expected {y.dtype.name.lower()}[{n}]", bias
        )
    return None


def _foldable(graph: IrGraph, m: Match) -> Decline | None:
    if not weight_product(graph, m.product):
        return Decline("the MatMul's weight is not a static [K, N] one binding holds", m.product)
    return bias_fits(graph, m.bias, graph.tensor(m.w).dims[1], m.product.outputs[0])


FOLD_ADD_INTO_MATMUL = Rule(
    "fold_add_into_MatMul",
    op.Add(op.MatMul(Var("x"), Var("w"), _name="product"), Const("bias"), _commute=True),
    lambda r, m: [r.op("MatMulGroup", m.x, m.w, m.bias, domain=ONYXIA_DOMAIN, bias=1)],
    check=_foldable,
    targets="Qwen2 q/k/v biases: genai fp32 Add(x @ W_qkv, b), optimum Add(b_q, x @ W_q) (and k, v)",
)
