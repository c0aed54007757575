"""`SessionOptions`, `RunOptions` and their enums, accepting every field onnxruntime users set.

What has a meaning here: `add_free_dimension_override_by_name` / `_by_denotation` (those dims become
static at compile time, and `get_inputs()` shows their values, as onnxruntime's do) and the initializers
given in place of the model's (`onyxia.ort.initializers`). The rest tunes
onnxruntime's own CPU engine (thread pools, arenas, optimisation levels, profiling files): Onyxia
accepts the value, keeps it (`get_session_options()` hands it back as set) and says once, at debug
level, that it has no effect. What would change results and cannot be honoured (custom-op libraries,
initializers swapped in from outside) is refused when called, never ignored.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from onyxia.ort.errors import NotImplemented as OrtNotImplemented
from onyxia.ort.errors import ort_error

__all__ = ["ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel", "RunOptions", "SessionOptions"]

log = logging.getLogger(__name__)
_told: set[str] = set()


def _no_effect(owner: str, name: str) -> None:
    key = f"{owner}.{name}"
    if key not in _told:
        _told.add(key)
        log.debug("%s has no effect on Onyxia (the WebGPU plan is compiled and scheduled by Onyxia)", key)


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class _Fields:
    """Attributes with onnxruntime's defaults; setting one Onyxia has no use for is logged once (debug)."""

    _DEFAULTS: dict[str, Any] = {}
    _config: dict[str, str]

    def __init__(self) -> None:
        for name, value in self._DEFAULTS.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_config", {})

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._DEFAULTS:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        _no_effect(type(self).__name__, name)
        object.__setattr__(self, name, value)

    def _set_config(self, key: str, value: str) -> None:
        _no_effect(type(self).__name__, f"config entry '{key}'")
        self._config[str(key)] = str(value)

    def _get_config(self, key: str) -> str:
        if key not in self._config:
            raise RuntimeError(f"{type(self).__name__} does not have configuration with key: {key}")
        return str(self._config[key])


class SessionOptions(_Fields):
    free_dims_by_name: dict[str, int]  # add_free_dimension_override_by_name
    free_dims_by_denotation: dict[str, int]  # add_free_dimension_override_by_denotation
    initializers: dict[str, np.ndarray]  # add_initializer, add_external_initializers
    external_files: dict[str, bytes]  # add_external_initializers_from_files_in_memory
    _DEFAULTS = {
        "enable_cpu_mem_arena": True,
        "enable_mem_pattern": True,
        "enable_mem_reuse": True,
        "enable_profiling": False,
        "execution_mode": ExecutionMode.ORT_SEQUENTIAL,
        "execution_order": ExecutionOrder.DEFAULT,
        "graph_optimization_level": GraphOptimizationLevel.ORT_ENABLE_ALL,
        "inter_op_num_threads": 0,
        "intra_op_num_threads": 0,
        "log_severity_level": -1,
        "log_verbosity_level": 0,
        "logid": "",
        "optimized_model_filepath": "",
        "profile_file_prefix": "onnxruntime_profile_",
        "use_deterministic_compute": False,
        "use_per_session_threads": True,
    }

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "free_dims_by_name", {})
        object.__setattr__(self, "free_dims_by_denotation", {})
        object.__setattr__(self, "initializers", {})
        object.__setattr__(self, "external_files", {})

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Compile with input dims named `dim_name` fixed at `dim_value` (a feed must then agree)."""
        self.free_dims_by_name[str(dim_name)] = _dim_value(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Compile with input dims whose denotation is `dim_denotation` (``DATA_BATCH``...) fixed."""
        self.free_dims_by_denotation[str(dim_denotation)] = _dim_value(dim_value)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._set_config(key, value)

    def get_session_config_entry(self, key: str) -> str:
        return self._get_config(key)

    def has_providers(self) -> bool:
        return False

    def add_provider(self, provider_name: str, options: dict[str, str] | None = None) -> None:
        _no_effect("SessionOptions", "add_provider")

    def add_provider_for_devices(self, *args: object) -> None:
        _no_effect("SessionOptions", "add_provider_for_devices")

    def set_provider_selection_policy(self, *args: object) -> None:
        _no_effect("SessionOptions", "set_provider_selection_policy")

    def set_load_cancellation_flag(self, value: bool) -> None:
        _no_effect("SessionOptions", "set_load_cancellation_flag")

    def register_custom_ops_library(self, library_path: str) -> None:
        raise _refused("register_custom_ops_library", f"library {library_path!r}")

    def add_initializer(self, name: str, value: Any) -> None:
        """Compile with initializer `name` replaced by `value` (an OrtValue or an array)."""
        self.initializers[str(name)] = _host_array(value)

    def add_external_initializers(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """Initializers whose data the model keeps outside it, given here instead."""
        for name, value in zip(names, values, strict=True):
            self.add_initializer(name, value)

    def add_external_initializers_from_files_in_memory(
        self, names: Sequence[str], buffers: Sequence[Any], lengths: Sequence[int]
    ) -> None:
        """External-data files (by the location the model names) given as bytes, not read from disk."""
        for name, buffer, length in zip(names, buffers, lengths, strict=True):
            self.external_files[str(name)] = bytes(memoryview(buffer)[: int(length)])


class RunOptions(_Fields):
    _DEFAULTS = {
        "log_severity_level": -1,
        "log_verbosity_level": 0,
        "logid": "",
        "only_execute_path_to_fetches": False,
        "terminate": False,
    }

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._set_config(key, value)

    def get_run_config_entry(self, key: str) -> str:
        return self._get_config(key)

    def add_active_adapter(self, adapter: object) -> None:
        raise _refused("add_active_adapter", "LoRA adapters")


def _host_array(value: Any) -> np.ndarray:
    numpy = getattr(value, "numpy", None)  # an OrtValue (Onyxia's or onnxruntime's)
    return np.array(numpy() if callable(numpy) else value)


def _dim_value(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"a free dimension override must be a non-negative int, not {value!r}")
    return value


def _refused(method: str, what: str) -> Exception:
    return ort_error(
        OrtNotImplemented,
        f"{method}() is not supported by Onyxia",
        f"{what} would change what the model computes, and Onyxia compiles only the model's own graph "
        "and operators; use onnxruntime for this session",
    )
