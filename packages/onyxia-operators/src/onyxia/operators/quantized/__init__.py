"""Quantized operators: com.microsoft MatMulNBits and GatherBlockQuantized (4-bit, block-wise), and the
com.onyxia MatMulNBitsGroup / GatedMatMulNBits (several MatMulNBits of one activation per dispatch);
ONNX DynamicQuantizeLinear, QuantizeLinear, DequantizeLinear and MatMulInteger, and com.microsoft MatMulIntegerToFloat
(the 8-bit ops of onnxruntime's `quantize_dynamic`), with com.microsoft DynamicQuantizeMatMul and the
com.onyxia DynamicQuantizeMatMulGroup / GatedDynamicQuantizeMatMul its fusions make; the QOperator format
(onnxruntime's quantize_static): ONNX QLinearMatMul, ConvInteger and QLinearConv, com.microsoft QGemm, QLinearAdd,
QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat and QLinearGlobalAveragePool (exact
int32 sums, requantized as MLAS does: `qlinear_params`, wgsl/requant.wgsl), and com.microsoft DynamicQuantizeLSTM
(on the float LSTM).

Both read 4-bit data packed in u32 words (`packing`), so an int4 model's weights take on the
GPU the bytes they take on disk; MatMulInteger reads a constant weight 4 bytes per word the same way.
"""

from onyxia.core import Operator
from onyxia.operators.quantized.conv_integer import CONV_INTEGER
from onyxia.operators.quantized.dequantize_linear import DequantizeLinearOp
from onyxia.operators.quantized.dynamic_quantize_linear import DynamicQuantizeLinearOp
from onyxia.operators.quantized.dynamic_quantize_lstm import DYNAMIC_QUANTIZE_LSTM_MS
from onyxia.operators.quantized.dynamic_quantize_matmul import DYNAMIC_QUANTIZE_MATMUL, DYNAMIC_QUANTIZE_MATMUL_MS
from onyxia.operators.quantized.gather_block_quantized import GatherBlockQuantizedOp
from onyxia.operators.quantized.matmul_bnb4 import MatMulBnb4Op
from onyxia.operators.quantized.matmul_integer import INTEGER_MATMUL, INTEGER_MATMUL_MS
from onyxia.operators.quantized.matmul_nbits import MatMulNBitsOp
from onyxia.operators.quantized.matmul_nbits_group import MATMUL_NBITS_GROUP
from onyxia.operators.quantized.qlinear_concat import QLINEAR_CONCAT_MS
from onyxia.operators.quantized.qlinear_elementwise import QLINEAR_ELEMENTWISE_MS
from onyxia.operators.quantized.qlinear_global_average_pool import QLINEAR_GLOBAL_AVERAGE_POOL_MS
from onyxia.operators.quantized.qlinear_matmul import QGEMM_MS, QLINEAR_MATMUL
from onyxia.operators.quantized.qlinear_softmax import QLINEAR_SOFTMAX_MS
from onyxia.operators.quantized.quantize_linear import QuantizeLinearOp

__all__ = ["QUANTIZED", "QUANTIZED_MS", "QUANTIZED_ONYXIA"]

QUANTIZED: dict[str, Operator] = {  # default domain
    "DynamicQuantizeLinear": DynamicQuantizeLinearOp(),
    "DequantizeLinear": DequantizeLinearOp(),
    "QuantizeLinear": QuantizeLinearOp(),
    **INTEGER_MATMUL,
    **QLINEAR_MATMUL,
    **CONV_INTEGER,
}
QUANTIZED_MS: dict[str, Operator] = {  # com.microsoft
    "MatMulNBits": MatMulNBitsOp(),
    "GatherBlockQuantized": GatherBlockQuantizedOp(),
    "MatMulBnb4": MatMulBnb4Op(),  # bitsandbytes FP4/NF4 on MatMulNBits' kernel
    **INTEGER_MATMUL_MS,
    **DYNAMIC_QUANTIZE_MATMUL_MS,
    **QGEMM_MS,
    **QLINEAR_ELEMENTWISE_MS,
    **QLINEAR_CONCAT_MS,
    **QLINEAR_GLOBAL_AVERAGE_POOL_MS,
    **DYNAMIC_QUANTIZE_LSTM_MS,
    **QLINEAR_SOFTMAX_MS,
}
QUANTIZED_ONYXIA: dict[str, Operator] = {**MATMUL_NBITS_GROUP, **DYNAMIC_QUANTIZE_MATMUL}  # com.onyxia
