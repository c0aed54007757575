"""com.microsoft DynamicQuantizeLSTM: an LSTM whose W [D, input, 4H] and R [D, H, 4H] are 8-bit, with a scale and
zero point per direction ([D]) or per direction and gate unit ([D, 4H]).

Lowered (`operators.lowering`) to the ONNX LSTM on dequantized weights: W and R become
``Transpose((Cast(q) - Cast(zero_point)) * scale, [0, 2, 1])``, the float LSTM's [D, 4H, K] layout, which
constant folding computes once when they are initializers (quantize_dynamic stores them so) and the GPU
computes when they are inputs. onnxruntime instead also quantizes the activations, X and every h(t-1), to
uint8 with a dynamic per-GEMM range (its quantized GEMMs), which costs it up to half a quantization step per
activation: so Onyxia equals onnxruntime's float LSTM on the dequantized weights (to float rounding), and
differs from onnxruntime's DynamicQuantizeLSTM by onnxruntime's own activation rounding (measured: at most
9.8e-3 on outputs of magnitude < 1 over 12 random symmetric-int8 models; the test accepts 2e-2 and checks
both). onnxruntime refuses zero points other than 0 per gate unit; Onyxia applies any zero point.
"""

from __future__ import annotations

from onyxia.core import DataType, InferenceCtx, NodeCtx, TensorType, shape_of
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.quantized.qlinear_params import byte_operand, same_dtype, scale_input

__all__ = ["DYNAMIC_QUANTIZE_LSTM_MS"]

_QUANTIZED = {1: ("W", 8, 9), 2: ("R", 10, 11)}  # input -> (name, scale input, zero point input)
_FLOAT_INPUTS = range(3, 8)  # B, sequence_lens, initial_h, initial_c, P: the LSTM's own
_ATTRIBUTES = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "input_forget")


def _check(ctx: NodeCtx) -> None:
    for i, (name, scale, zp) in _QUANTIZED.items():
        byte_operand(ctx, i, name)
        if ctx.input_rank(i) != 3:
            raise ctx.error(f"input {i} ({name}) has rank {ctx.input_rank(i)}; expected [D, K, 4 * hidden_size]")
        scale_input(ctx, scale, f"{name}_scale")
        same_dtype(ctx, zp, i, f"{name}_zero_point")
        d, gates = ctx.input_dims(i)[0], ctx.input_dims(i)[2]
        for p, what in ((scale, f"{name}_scale"), (zp, f"{name}_zero_point")):
            if ctx.has_input(p) and list(ctx.input_dims(p)) not in ([d], [d, gates]):
                raise ctx.error(
                    f"input {p} ({what}) has dims {list(ctx.input_dims(p))}; expected [{d}] or [{d}, {gates}]"
                )


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    """Y [seq, D, batch, H], Y_h and Y_c [D, batch, H] (onnxruntime's op has no `layout`); the lowered LSTM
    checks the rest of the node when it is typed."""
    _check(ctx)
    if ctx.input_rank(0) != 3:
        raise ctx.error(f"input 0 (X) has rank {ctx.input_rank(0)}; expected [seq_length, batch_size, input_size]")
    seq, batch, _ = ctx.input_dims(0)
    d, hidden, _ = ctx.input_dims(2)
    dtype = ctx.input_dtype(0)
    dims = [[seq, d, batch, hidden], [d, batch, hidden], [d, batch, hidden]]
    return [TensorType(dtype, shape_of(dims[i])) for i in range(ctx.num_outputs) if ctx.has_output(i)]


def _dequantized(body: Body, i: int) -> int:
    """Input `i` (W or R) as float [D, 4H, K]: (q - zero point) * scale, the scale per direction or per unit."""
    _, scale_at, zp_at = _QUANTIZED[i]
    per_unit = body.ctx.input_rank(scale_at) == 2
    shape = body.ints([0, 1, -1] if per_unit else [0, 1, 1], f"{'unit' if per_unit else 'direction'}_shape")
    q = body.op("Cast", body.required(i), to=int(DataType.FLOAT))
    if body.input(zp_at) is not None:
        zp = body.op("Reshape", body.op("Cast", body.input(zp_at), to=int(DataType.FLOAT)), shape)
        q = body.op("Sub", q, zp)
    scaled = body.op("Mul", q, body.op("Reshape", body.required(scale_at), shape))
    return body.op("Transpose", scaled, perm=[0, 2, 1])


def _lower(body: Body) -> list[int | None]:
    inputs: list[int | None] = [body.required(0), _dequantized(body, 1), _dequantized(body, 2)]
    inputs += [body.input(i) for i in _FLOAT_INPUTS]
    attrs = {name: body.node.attributes[name] for name in _ATTRIBUTES if name in body.node.attributes}
    outputs = body.ops("LSTM", *inputs, outputs=3, **attrs)
    return [outputs[i] if t is not None else None for i, t in enumerate(body.node.outputs)]


DYNAMIC_QUANTIZE_LSTM_MS: dict[str, LoweredOp] = {
    "DynamicQuantizeLSTM": LoweredOp("DynamicQuantizeLSTM", _infer, _lower)
}
