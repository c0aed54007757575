"""Einsum, lowered (`operators.lowering`) to the ops it is made of: ReduceSum over an index only one operand
has and the output drops, Transpose and Reshape to a batched [batch.., left, contracted] x [batch..,
contracted, right] MatMul per pair of operands (left to right), and a last Transpose into the output's
order. The MatMul then meets the matmul family's kernels and fusions like any other; reshape targets are
Shape/Gather/Mul/Concat chains, which fold to constants when the dims are static and follow the
dims at run time when they are not.

Ellipsis dims are named (`...` becomes as many internal indices as the operand has dims left over,
aligned from the right, so they broadcast as numpy does). An index repeated within one operand (a
diagonal, ``ii->i``) is refused naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import InferenceCtx, NodeCtx, SymbolicDim, TensorType, UnsupportedOpError, shape_of
from onyxia.operators.lowering import Body, LoweredOp

__all__ = ["EINSUM"]

_ELLIPSIS_NAMES = "0123456789"  # internal index names for ellipsis dims (equations use letters only)


@dataclass(frozen=True)
class _Equation:
    terms: tuple[str, ...]  # one per operand, ellipsis expanded
    output: str


def _parse(ctx: NodeCtx) -> _Equation:
    text = ctx.attr_str("equation").replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    operands = lhs.split(",")
    if len(operands) != ctx.num_inputs:
        raise ctx.error(f"equation '{text}' has {len(operands)} operands; the node has {ctx.num_inputs} inputs")
    ranks = [ctx.input_rank(i) for i in range(len(operands))]
    width = max((r - len(t.replace("...", "")) for t, r in zip(operands, ranks) if "..." in t), default=0)
    if width > len(_ELLIPSIS_NAMES):
        raise ctx.error(f"equation '{text}': an ellipsis of {width} dims; at most {len(_ELLIPSIS_NAMES)}")
    ellipsis = _ELLIPSIS_NAMES[:width]
    terms = []
    for i, (term, rank) in enumerate(zip(operands, ranks)):
        if "..." in term:
            own = rank - len(term.replace("...", ""))
            term = term.replace("...", ellipsis[width - own :])
        if not term.isalnum() or len(term) != rank:
            raise ctx.error(f"equation '{text}': operand {i} '{operands[i]}' does not match input {i} of rank {rank}")
        repeated = sorted({c for c in term if term.count(c) > 1})
        if repeated:
            raise UnsupportedOpError(
                f"node '{ctx.node.name}' (Einsum): equation '{text}' repeats {repeated} within operand {i} "
                "(a diagonal), which is not implemented"
            )
        terms.append(term)
    if arrow:
        output = rhs.replace("...", ellipsis)
    else:  # implicit: the ellipsis, then every letter used once, alphabetically
        letters = "".join(terms)
        output = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c.isalpha()))
    unknown = sorted(set(output) - set("".join(terms)))
    if unknown:
        raise ctx.error(f"equation '{text}': output indices {unknown} appear in no operand")
    return _Equation(tuple(terms), output)


def _dims(ctx: NodeCtx, eq: _Equation) -> dict[str, SymbolicDim]:
    """Each index's dim, broadcast over the operands that have it (1 against n gives n)."""
    found: dict[str, SymbolicDim] = {}
    for i, term in enumerate(eq.terms):
        for c, d in zip(term, ctx.input_dims(i)):
            if c not in found or found[c] == 1:
                found[c] = d
            elif d != 1 and d != found[c] and isinstance(d, int) and isinstance(found[c], int):
                raise ctx.error(f"index '{c}' is {found[c]} in one operand and {d} in input {i}")
    return found


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    eq = _parse(ctx)
    dims = _dims(ctx, eq)
    return [TensorType(ctx.input_dtype(0), shape_of([dims[c] for c in eq.output]))]


class _Operand:
    """A tensor in the body and the index of each of its dims."""

    def __init__(self, body: Body, tensor: int, term: str) -> None:
        self.body, self.tensor, self.term = body, tensor, term

    def sum_out(self, keep: set[str]) -> _Operand:
        drop = [i for i, c in enumerate(self.term) if c not in keep]
        if not drop:
            return self
        summed = self.body.op("ReduceSum", self.tensor, self.body.ints(drop, "axes"), keepdims=0)
        return _Operand(self.body, summed, "".join(c for c in self.term if c in keep))

    def ordered(self, order: str) -> _Operand:
        if order == self.term:
            return self
        perm = [self.term.index(c) for c in order]
        return _Operand(self.body, self.body.op("Transpose", self.tensor, perm=perm), order)

    def sizes(self, indices: str) -> int:
        """A [len(indices)] int64 tensor of these dims (in this operand's current order)."""
        shape = self.body.op("Shape", self.tensor)
        return self.body.op("Gather", shape, self.body.ints([self.term.index(c) for c in indices], "dims"), axis=0)

    def product(self, indices: str) -> int:
        """A [1] tensor: the product of these dims (a Mul chain, which folds symbolic dims too)."""
        total = self.body.ints([1], "one")
        for c in indices:
            total = self.body.op("Mul", total, self.sizes(c))
        return total


def _contract(a: _Operand, b: _Operand, keep: set[str]) -> _Operand:
    """a x b over their shared indices that `keep` drops; the result's term: batch, left, right."""
    body = a.body
    a, b = a.sum_out(keep | set(b.term)), b.sum_out(keep | set(a.term))
    batch = "".join(c for c in a.term if c in b.term and c in keep)
    inner = "".join(c for c in a.term if c in b.term and c not in keep)
    left = "".join(c for c in a.term if c not in b.term)
    right = "".join(c for c in b.term if c not in a.term)
    a, b = a.ordered(batch + left + inner), b.ordered(batch + inner + right)

    def flat(x: _Operand, first: str, second: str) -> int:
        parts = ([x.sizes(batch)] if batch else []) + [x.product(first), x.product(second)]
        return body.op("Reshape", x.tensor, body.op("Concat", *parts, axis=0))

    product = body.op("MatMul", flat(a, left, inner), flat(b, inner, right))
    zeros = [body.ints([0] * len(batch), "batch")] if batch else []  # Reshape's 0 keeps MatMul's broadcast dims
    parts = [*zeros, *([a.sizes(left)] if left else []), *([b.sizes(right)] if right else [])]
    target = body.op("Concat", *parts, axis=0) if parts else body.ints([], "scalar_shape")
    return _Operand(body, body.op("Reshape", product, target), batch + left + right)


def _lower(body: Body) -> list[int | None]:
    eq = _parse(body.ctx)
    operands = [_Operand(body, body.required(i), term) for i, term in enumerate(eq.terms)]
    result = operands[0].sum_out(set(eq.output) | set("".join(eq.terms[1:])))
    for i, operand in enumerate(operands[1:], start=1):
        keep = set(eq.output) | set("".join(eq.terms[i + 1 :]))
        result = _contract(result, operand, keep)
    return [result.sum_out(set(eq.output)).ordered(eq.output).tensor]


EINSUM: dict[str, LoweredOp] = {"Einsum": LoweredOp("Einsum", _infer, _lower)}
