"""Selected ONNX node cases that are known not to pass, each with its root cause.

A case listed here must fail or be rejected (`test_conformance` fails a listed case that passes, so
the list stays honest). Cases whose inputs or outputs have no WebGPU storage type (float64,
bfloat16, string, sequences ...) are never listed: the harness rejects those by dtype on its own.
Reasons open with what kind of gap it is: "not implemented" (a deliberate compile-time rejection),
"bug" (wrong values or a crash to fix), or "reference" (the ONNX reference disagrees with onnxruntime).
"""

__all__ = ["EXPECTED"]

_POOL_3D = "not implemented: 3-D kernels (1-D and 2-D spatial axes only)"
_CUBIC = "not implemented: Resize mode=cubic (nearest and linear only)"
_CROP = "not implemented: Resize coordinate_transformation_mode=tf_crop_and_resize"
_ANTIALIAS = "not implemented: Resize antialias=1"
_F64_BODY = "not implemented: the expanded function body Casts to float64, which WebGPU cannot store"

EXPECTED: dict[str, str] = {
    # Attention (expanded function bodies)
    "test_attention_local_window_gqa_rank4_mask_expanded": _F64_BODY,
    "test_reduce_log_sum_exp_empty_set_expanded": _F64_BODY,
    # Pooling and convolution
    "test_averagepool_3d_default": _POOL_3D,
    "test_averagepool_3d_dilations_small": _POOL_3D,
    "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True": _POOL_3D,
    "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False": _POOL_3D,
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True": _POOL_3D,
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False": _POOL_3D,
    "test_lppool_3d_default": _POOL_3D,
    "test_maxpool_3d_default": _POOL_3D,
    "test_maxpool_3d_dilations": _POOL_3D,
    "test_maxpool_3d_dilations_use_ref_impl": _POOL_3D,
    "test_maxpool_3d_dilations_use_ref_impl_large": _POOL_3D,
    "test_convtranspose_3d": _POOL_3D,
    "test_maxpool_2d_uint8": "not implemented: MaxPool on uint8 (float and float16 only)",
    # Normalization
    "test_batchnorm_example_training_mode": "not implemented: BatchNormalization training_mode=1 (inference only)",
    "test_batchnorm_epsilon_training_mode": "not implemented: BatchNormalization training_mode=1 (inference only)",
    # Resize
    "test_resize_downsample_scales_linear_align_corners": (
        "reference: for align_corners with scales, the ONNX reference divides by the unrounded output length "
        "(0.6 x 4 = 2.4) and expects [1, 3.14]; onnxruntime and Onyxia use the integer size 2 and give [1, 4]"
    ),
    "test_resize_upsample_scales_cubic": _CUBIC,
    "test_resize_upsample_scales_cubic_align_corners": _CUBIC,
    "test_resize_downsample_scales_cubic": _CUBIC,
    "test_resize_downsample_scales_cubic_align_corners": _CUBIC,
    "test_resize_upsample_sizes_cubic": _CUBIC,
    "test_resize_downsample_sizes_cubic": _CUBIC,
    "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside": _CUBIC,
    "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside": _CUBIC,
    "test_resize_upsample_scales_cubic_asymmetric": _CUBIC,
    "test_resize_downsample_scales_cubic_antialias": _CUBIC,
    "test_resize_downsample_sizes_cubic_antialias": _CUBIC,
    "test_resize_tf_crop_and_resize": _CROP,
    "test_resize_tf_crop_and_resize_extrapolation_value": _CROP,
    "test_resize_tf_crop_and_resize_axes_2_3": _CROP,
    "test_resize_tf_crop_and_resize_axes_3_2": _CROP,
    "test_resize_downsample_scales_linear_antialias": _ANTIALIAS,
    "test_resize_downsample_sizes_linear_antialias": _ANTIALIAS,
}
