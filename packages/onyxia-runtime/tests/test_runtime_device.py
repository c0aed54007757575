"""Adapter selection, device features, and wgpu failures surfacing as onyxia errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import wgpu
from runtime_plans import scale_plan

from onyxia.core import CompiledShader, DeviceError, ShaderError
from onyxia.core.settings import override
from onyxia.runtime import Runtime
from onyxia.runtime.adapter import describe_adapter


def test_adapter_info_and_features(runtime: Runtime) -> None:
    assert runtime.adapter_info["backend_type"] in {"Vulkan", "Metal", "D3D12", "OpenGL"}
    assert "immediates" in runtime.features and "shader-f16" in runtime.features


def test_uniform_fallback_does_not_request_immediates(uniform_runtime: Runtime) -> None:
    assert "immediates" not in uniform_runtime.features


def test_backend_from_settings() -> None:
    with override(backend="vulkan"):  # what ONYXIA_BACKEND=vulkan sets
        assert Runtime().adapter_info["backend_type"] == "Vulkan"


def test_backend_without_adapter_lists_what_was_seen() -> None:
    # the machine's own adapters (llvmpipe here and in CI; a GPU's Vulkan and GL views elsewhere), as wgpu lists them
    seen = [describe_adapter(a) for a in wgpu.gpu.enumerate_adapters_sync()]
    assert seen, "wgpu lists no adapter"
    with (
        override(backend="metal"),
        pytest.raises(
            DeviceError, match=r"ONYXIA_BACKEND='metal': no compute-capable Metal adapter; adapters seen: "
        ) as raised,
    ):
        Runtime()
    for adapter in seen:
        assert adapter in str(raised.value)


def test_unknown_backend_lists_the_valid_ones() -> None:
    with pytest.raises(
        DeviceError, match=r"'cuda' is not a backend; expected one of \['dx12', 'gl', 'metal', 'vulkan'\]"
    ):
        Runtime(backend="cuda")


def test_missing_required_feature(runtime: Runtime) -> None:
    compiled = scale_plan(["n"])
    compiled.required_features.add("quantum-entanglement")
    with pytest.raises(DeviceError, match=r"requires adapter features \['quantum-entanglement'\]"):
        runtime.load_model(compiled)


def test_wgsl_error_names_shader_and_node(any_runtime: Runtime) -> None:
    compiled = scale_plan(["n"], expr="x[i] * undefined_thing")
    with pytest.raises(
        ShaderError, match=r"shader 'scale' \(node 'custom_node'\): WGSL compilation failed: .*undefined_thing"
    ):
        any_runtime.load_model(compiled)


def test_missing_entry_point_is_a_shader_error(runtime: Runtime) -> None:
    compiled = scale_plan([4])
    shader = compiled.shaders[0]
    compiled.shaders[0] = CompiledShader(shader.label, shader.source, "not_main", shader.immediate_size)
    with pytest.raises(ShaderError, match=r"shader 'scale' \(node 'custom_node'\): creating the compute pipeline"):
        runtime.load_model(compiled)


def test_uniform_rewrite_needs_the_declaration(uniform_runtime: Runtime) -> None:
    compiled = scale_plan(["n"])
    shader = compiled.shaders[0]
    source = shader.source.replace("var<immediate> imm: Immediates;", "var<immediate> imm : Immediates;")
    compiled.shaders[0] = CompiledShader(shader.label, source, shader.entry_point, shader.immediate_size)
    with pytest.raises(ShaderError, match=r"shader 'scale': declares 4 bytes of immediates but its source has no"):
        uniform_runtime.load_model(compiled)


def test_pipelines_are_shared_between_dispatches_of_one_shader(runtime: Runtime) -> None:
    compiled = scale_plan([8])
    op = compiled.operations[0]
    op.steps.append(op.steps[0])  # the same dispatch twice: one module, one pipeline, two bind groups
    executor = runtime.load_model(compiled)
    assert executor.stats.shader_modules_created == 1 and executor.stats.pipelines_created == 1
    assert executor.stats.bind_groups_created == 2
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)


def test_runtime_imports_no_compiler_stack() -> None:
    code = (
        "import sys, onyxia.runtime\n"
        "bad = [m for m in sys.modules if m == 'onnx' or m.startswith(('onnx.', 'onyxia.onnx', "
        "'onyxia.operators', 'onyxia.compiler'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_several_runtimes_coexist_in_one_process(runtime: Runtime, uniform_runtime: Runtime) -> None:
    """Each `Runtime` opens its own device; one plan loads on both and each runs it with its own buffers
    (a value does not move between them on the GPU: that is why `onyxia.ort` shares one per process)."""
    compiled = scale_plan(["n"])
    first, second = runtime.load_model(compiled), uniform_runtime.load_model(compiled)
    assert first.ctx.device is not second.ctx.device
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(first.run({"x": x})["y"], 2 * x)
    np.testing.assert_array_equal(second.run({"x": x[:3]})["y"], 2 * x[:3])
    np.testing.assert_array_equal(first.run({"x": x[:2]})["y"], 2 * x[:2])  # the other's dims left it alone
