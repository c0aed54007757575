"""Execution providers as onnxruntime names them, answered for an engine that has one: its own.

Onyxia runs every node of the plan on one WebGPU device, so it has exactly one provider, named
`PROVIDER` (not one of onnxruntime's: code that asks whether CUDA is present must not be told yes).
A `providers=` list naming others (``["CUDAExecutionProvider", "CPUExecutionProvider"]``, what most
packages pass) is never an error: each unknown name gets onnxruntime's own warning, worded as its
`check_and_normalize_provider_args` words it, and the session runs on Onyxia's provider.
"""

from __future__ import annotations

import collections.abc
import warnings
from collections.abc import Sequence
from typing import Any

__all__ = [
    "PROVIDER",
    "check_known",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "normalize_providers",
]

PROVIDER = "OnyxiaWebGPUExecutionProvider"

# onnxruntime 1.32's get_all_providers(): names it knows (falls back from) even where not built in
_ONNXRUNTIME_NAMES = frozenset(
    [
        "Tensorrt",
        "CUDA",
        "MIGraphX",
        "OpenVINO",
        "Dnnl",
        "VitisAI",
        "QNN",
        "Nnapi",
        "VSINPU",
        "Js",
        "CoreML",
        "Dml",
        "Rknpu",
        "WebNN",
        "WebGpu",
        "Xnnpack",
        "CANN",
        "Azure",
        "CPU",
    ]
)

ProviderList = Sequence[str | tuple[str, dict[Any, Any]]] | None


def get_available_providers() -> list[str]:
    return [PROVIDER]


def get_all_providers() -> list[str]:
    return [PROVIDER]


def get_device() -> str:
    """onnxruntime answers "CPU" or "GPU" for the build; Onyxia's engine is a GPU (WebGPU) one."""
    return "GPU"


def check_known(names: Sequence[str]) -> None:
    """`set_providers` of a name no onnxruntime build knows is onnxruntime's RuntimeError, not a fallback."""
    for name in names:
        if name != PROVIDER and name.removesuffix("ExecutionProvider") not in _ONNXRUNTIME_NAMES:
            raise RuntimeError(f"Unknown Provider Type: {name}")


def normalize_providers(
    providers: ProviderList, provider_options: Sequence[dict[Any, Any]] | None
) -> dict[str, dict[str, str]]:
    """Onyxia's provider and the options given for it (as strings, as onnxruntime keeps them).

    The argument checks and the warnings are onnxruntime's: a malformed list is its ValueError,
    a provider Onyxia lacks its UserWarning (and then ignored)."""
    given: dict[str, dict[str, str]] = {}

    def add(name: str, options: dict[Any, Any]) -> None:
        if name != PROVIDER:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(get_available_providers())}'",
                stacklevel=4,
            )
        if name in given:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=4)
            return
        given[name] = {str(k): str(v) for k, v in options.items()}

    if providers is None:
        return {PROVIDER: {}}
    if not isinstance(providers, collections.abc.Sequence):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        for name, options in zip(providers, provider_options, strict=True):
            add(str(name), options)
    else:
        for provider in providers:
            if isinstance(provider, str):
                add(provider, {})
            elif (
                isinstance(provider, tuple)
                and len(provider) == 2
                and isinstance(provider[0], str)
                and isinstance(provider[1], dict)
            ):
                add(provider[0], provider[1])
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    return {PROVIDER: given.get(PROVIDER, {})}
