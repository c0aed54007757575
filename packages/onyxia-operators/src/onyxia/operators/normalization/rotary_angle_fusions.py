"""``rotate_by_angles``: a rotation whose caches are ``Cos(a)`` and ``Sin(a)`` of one computed angle table reads
the angles and takes cos and sin itself (com.microsoft RotaryEmbedding with Onyxia's ``angle_cache=1``).

PyTorch's exporter (opset 23) passes each RotaryEmbedding ``Cos(freqs)`` and ``Sin(freqs)`` of the positions
times the inverse frequencies, computed at run time (the lowering views them as [S, H / 2] per-token tables).
After common-subexpression elimination the model computes them once per step: two dispatches and two stored
tables that every layer's rotation then reads. The kernels compute the same builtin ``cos``/``sin`` of the
same f32 angle as the Cos and Sin kernels, so the result is unchanged; the two dispatches go once every
rotation reads the angles (`EliminateDeadCode` drops the Cos and Sin then).

Declines (reason logged): angles that are not f32 (an f16 graph's Cos rounds in f16), a folded table (a
constant cache is cheaper read than recomputed), cos and sin views of different shapes or one viewed and the
other not.
"""

from __future__ import annotations

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import AnyOf, Decline, Match, NewValue, Rewriter, Rule, Var, is_folded, ms, op
from onyxia.core.shapes import Absent

__all__ = ["ROTARY_ANGLE_FUSIONS", "ROTATE_BY_ANGLES"]


def _table(kind: str) -> AnyOf:
    trig = op.any_of((kind,), Var("angles"), _name=kind.lower(), _shared=True)
    return AnyOf(op.Reshape(trig, Var(f"{kind.lower()}_shape"), _name=f"{kind.lower()}_view", _shared=True), trig)


def _plain(graph: IrGraph, node: IrNode) -> bool:
    return len(node.inputs) == 4 and not node.attributes.get("angle_cache", 0) and not is_folded(graph, node)


def _dims(graph: IrGraph, node: IrNode | None) -> tuple[object, ...] | None:
    if node is None or node.outputs[0] is None:
        return None
    shape = graph.tensor(node.outputs[0]).shape
    return None if isinstance(shape, Absent) else tuple(shape.dims)


def _check(graph: IrGraph, m: Match) -> Decline | None:
    if graph.tensor(m.angles).dtype != DataType.FLOAT:
        return Decline(f"the angles are {graph.tensor(m.angles).dtype.short}, not f32", m.node)
    if is_folded(graph, m.cos) or is_folded(graph, m.sin):
        return Decline("the cos/sin tables are folded constants (read, not recomputed)", m.node)
    cos_view, sin_view = getattr(m, "cos_view", None), getattr(m, "sin_view", None)
    if (cos_view is None) != (sin_view is None) or _dims(graph, cos_view) != _dims(graph, sin_view):
        return Decline("the cos and sin caches are not the same view of the angles", m.node)
    if cos_view is not None and _dims(graph, cos_view) is None:
        return Decline("the cos cache's view has no inferred shape", m.node)
    return None


def _rewrite(r: Rewriter, m: Match) -> list[NewValue]:
    table = m.angles if getattr(m, "cos_view", None) is None else r.op("Reshape", m.angles, m.cos_shape)
    attrs = {**m.node.attributes, "angle_cache": 1}
    return [r.op("RotaryEmbedding", m.x, m.positions, table, table, domain="com.microsoft", **attrs)]


ROTATE_BY_ANGLES = Rule(
    "rotate_by_angles",
    ms.RotaryEmbedding(Var("x"), Var("positions"), _table("Cos"), _table("Sin"), _where=_plain),
    _rewrite,
    check=_check,
    targets="torch.onnx.export(dynamo=True): RotaryEmbedding(x, Cos(freqs), Sin(freqs)), lowered to the contrib op",
)

ROTARY_ANGLE_FUSIONS = (ROTATE_BY_ANGLES,)
