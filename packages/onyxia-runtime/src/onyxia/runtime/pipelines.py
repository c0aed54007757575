"""Shader modules, bind group layouts and compute pipelines, each created once per executor.

Immediates have two delivery paths with one WGSL source. Where the device has the `immediates`
feature the planner's ``var<immediate> imm: Immediates;`` stays and values go through
`set_immediates`. Otherwise that exact line becomes a uniform binding at group 1 and each dispatch
owns a small uniform buffer; the struct is all u32 fields at 4-byte offsets, which has the same
layout in both address spaces, so the same byte block feeds either path.

Modules and pipelines are keyed by their WGSL source, not by shader index: when a compiled dim
changes and the executor moves to a re-planned variant (`runtime/variants.py`), only the shaders
whose defs used that dim have new sources, so only those are compiled, and moving back to an earlier
variant compiles nothing. `shaders` is the current plan's list that dispatches index into.
"""

from __future__ import annotations

from dataclasses import dataclass

import wgpu

from onyxia.core.errors import DeviceError, ShaderError
from onyxia.core.plan import CompiledShader, Dispatch
from onyxia.core.shader_dims import IMMEDIATE_DECLARATION
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary

__all__ = ["UNIFORM_DECLARATION", "PipelineCache", "PipelineEntry", "layout_signature", "rewrite_immediates"]

UNIFORM_DECLARATION = "@group(1) @binding(0) var<uniform> imm: Immediates;"

LayoutSignature = tuple[tuple[int, bool], ...]  # (binding, read_only), sorted by binding
PipelineKey = tuple[str, str, int, LayoutSignature]  # (WGSL as compiled, entry point, immediates, layout)


def layout_signature(dispatch: Dispatch) -> LayoutSignature:
    return tuple(sorted((b.binding, b.read_only) for b in dispatch.bindings))


def rewrite_immediates(shader: CompiledShader) -> str:
    """The source with immediates moved to the group-1 uniform; an error if the declaration is missing."""
    if shader.immediate_size == 0:
        return shader.source
    if IMMEDIATE_DECLARATION not in shader.source:
        raise ShaderError(
            f"shader '{shader.label}': declares {shader.immediate_size} bytes of immediates but its source "
            f"has no '{IMMEDIATE_DECLARATION}' line for the uniform fallback to rewrite"
        )
    return shader.source.replace(IMMEDIATE_DECLARATION, UNIFORM_DECLARATION)


@dataclass(frozen=True)
class PipelineEntry:
    """What encoding a dispatch needs from the cache; `uniform_layout` is set on the fallback path."""

    pipeline: wgpu.GPUComputePipeline
    layout: wgpu.GPUBindGroupLayout
    uniform_layout: wgpu.GPUBindGroupLayout | None


class PipelineCache:
    """Modules by WGSL source, pipelines by (source, entry point, immediates, layout signature)."""

    def __init__(self, ctx: DeviceContext, shaders: list[CompiledShader], stats: ExecutorStats) -> None:
        self.ctx = ctx
        self.shaders = shaders
        self.stats = stats
        self._modules: dict[str, wgpu.GPUShaderModule] = {}
        self._layouts: dict[LayoutSignature, wgpu.GPUBindGroupLayout] = {}
        self._pipelines: dict[PipelineKey, PipelineEntry] = {}
        self._uniform_layout: wgpu.GPUBindGroupLayout | None = None

    def uses_uniform(self, shader_index: int) -> bool:
        return not self.ctx.use_immediates and self.shaders[shader_index].immediate_size > 0

    def pipeline(self, dispatch: Dispatch, node: str) -> PipelineEntry:
        if not 0 <= dispatch.shader_index < len(self.shaders):
            raise ShaderError(
                f"node '{node}': dispatch uses shader {dispatch.shader_index}; the plan has {len(self.shaders)} shaders"
            )
        index = dispatch.shader_index
        shader = self.shaders[index]
        source = rewrite_immediates(shader) if self.uses_uniform(index) else shader.source
        key = (source, shader.entry_point, shader.immediate_size, layout_signature(dispatch))
        if key not in self._pipelines:
            self._pipelines[key] = self._create(index, key, node)
        return self._pipelines[key]

    def _create(self, index: int, key: PipelineKey, node: str) -> PipelineEntry:
        source, _, _, signature = key
        shader = self.shaders[index]
        where = f"shader '{shader.label}' (node '{node}')"
        self._check_immediates(shader, where)
        module = self._module(shader, source, where)
        layout = self._layout(signature, where)
        groups = [layout]
        immediate_size = shader.immediate_size
        uniform_layout = None
        if self.uses_uniform(index):
            uniform_layout = self._uniform(where)
            groups.append(uniform_layout)
            immediate_size = 0
        with wgpu_boundary(ShaderError, f"{where}: creating the compute pipeline"):
            pl = self.ctx.device.create_pipeline_layout(
                label=shader.label, bind_group_layouts=groups, immediate_size=immediate_size
            )
            pipeline = self.ctx.device.create_compute_pipeline(
                label=shader.label, layout=pl, compute={"module": module, "entry_point": shader.entry_point}
            )
        self.stats.pipelines_created += 1
        return PipelineEntry(pipeline, layout, uniform_layout)

    def _check_immediates(self, shader: CompiledShader, where: str) -> None:
        limit = self.ctx.limits.get("max-immediate-size", 0) if self.ctx.use_immediates else 1 << 16
        if shader.immediate_size % 4 or shader.immediate_size > limit:
            raise DeviceError(
                f"{where}: declares {shader.immediate_size} bytes of immediates; expected a multiple of 4 "
                f"of at most {limit} bytes"
            )

    def _module(self, shader: CompiledShader, source: str, where: str) -> wgpu.GPUShaderModule:
        if source not in self._modules:
            with wgpu_boundary(ShaderError, f"{where}: WGSL compilation failed"):
                self._modules[source] = self.ctx.device.create_shader_module(label=shader.label, code=source)
            self.stats.shader_modules_created += 1
        return self._modules[source]

    def _layout(self, signature: LayoutSignature, where: str) -> wgpu.GPUBindGroupLayout:
        if signature not in self._layouts:
            limit = self.ctx.limits["max-storage-buffers-per-shader-stage"]
            if len(signature) > limit:
                raise DeviceError(f"{where}: binds {len(signature)} storage buffers; the adapter allows {limit}")
            entries = [
                {
                    "binding": binding,
                    "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "read-only-storage" if read_only else "storage"},
                }
                for binding, read_only in signature
            ]
            with wgpu_boundary(DeviceError, f"{where}: creating its bind group layout"):
                self._layouts[signature] = self.ctx.device.create_bind_group_layout(entries=entries)
            self.stats.bind_group_layouts_created += 1
        return self._layouts[signature]

    def _uniform(self, where: str) -> wgpu.GPUBindGroupLayout:
        if self._uniform_layout is None:
            entry = {"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "uniform"}}
            with wgpu_boundary(DeviceError, f"{where}: creating the immediates uniform layout"):
                self._uniform_layout = self.ctx.device.create_bind_group_layout(entries=[entry])
            self.stats.bind_group_layouts_created += 1
        return self._uniform_layout
