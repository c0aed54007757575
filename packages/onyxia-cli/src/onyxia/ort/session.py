"""`InferenceSession`: onnxruntime's session API over one compiled Onyxia plan.

The constructor does everything that does not depend on the feed shapes, as onnxruntime users expect:
parse, compile with the symbolic dims open (`compiling.compile_plan`), pipelines and weights onto the
shared device (`device.shared_runtime`). `run()` checks the feed by onnxruntime's rules (`feeds`),
lets the executor bind the symbolic dims from the shapes (no recompile; a dim a kernel needs as a
number switches to a plan variant for its value, compiled once and reused) and returns a list in the
order asked. All runs of a session are serialised by one lock, so threads may share it, as
onnxruntime promises; nothing is printed or logged at INFO or above on the way.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from onyxia.core.errors import InputError, OnyxiaError
from onyxia.ort.device import shared_runtime
from onyxia.ort.device_run import run_on_device
from onyxia.ort.errors import Fail, InvalidArgument, NotImplemented, ort_error
from onyxia.ort.feeds import FeedChecker
from onyxia.ort.io_binding import SessionIOBinding
from onyxia.ort.loading import load_compiled, model_source
from onyxia.ort.node_arg import ModelMetadata, NodeArg
from onyxia.ort.options import RunOptions, SessionOptions
from onyxia.ort.ort_value import GpuTensor, OrtValue
from onyxia.ort.providers import PROVIDER, ProviderList, check_known, normalize_providers
from onyxia.runtime import PlanExecutor

__all__ = ["InferenceSession"]


class InferenceSession:
    """``InferenceSession(path_or_bytes, sess_options=None, providers=None, provider_options=None)``."""

    def __init__(
        self,
        path_or_bytes: Any,
        sess_options: SessionOptions | None = None,
        providers: ProviderList = None,
        provider_options: Sequence[dict[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        source = model_source(path_or_bytes)
        self._model_path = str(source) if not isinstance(source, bytes) else None
        self._provider_options = _providers_or_fallback(providers, provider_options)
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._runtime = shared_runtime()
        compiled = load_compiled(source, self._sess_options, self._runtime)
        self._signature = compiled.signature
        self._checker = FeedChecker(self._signature.inputs)
        self._output_names = [o.name for o in self._signature.outputs]
        self._overridable = {a.name for a in self._signature.overridable}
        self._lock = threading.Lock()
        try:
            self._executor: PlanExecutor = self._runtime.load_model(compiled.plan)
        except OnyxiaError as e:
            raise ort_error(Fail, "Onyxia could not load the compiled model onto the device", str(e)) from e

    # ----- what the model is --------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return list(self._signature.inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._signature.outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._signature.overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return self._signature.metadata

    def get_providers(self) -> list[str]:
        return [PROVIDER]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {name: dict(options) for name, options in self._provider_options.items()}

    def set_providers(
        self, providers: ProviderList = None, provider_options: Sequence[dict[Any, Any]] | None = None
    ) -> None:
        """onnxruntime re-creates the session for new providers; Onyxia has one, so only the checks,
        warnings and options change (the plan stays loaded)."""
        self._provider_options = normalize_providers(providers, provider_options)
        check_known([p if isinstance(p, str) else p[0] for p in providers or []])

    def get_input_memory_infos(self) -> list[str]:
        """Where each input is read from: the WebGPU device's memory (one entry per input)."""
        return [PROVIDER] * len(self._signature.inputs)

    def get_output_memory_infos(self) -> list[str]:
        return [PROVIDER] * len(self._signature.outputs)

    def get_input_epdevices(self) -> list[None]:
        """onnxruntime's plugin-EP devices; none for Onyxia's own provider (one None per input)."""
        return [None] * len(self._signature.inputs)

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    @property
    def executor(self) -> PlanExecutor:
        """The Onyxia executor behind the session (its `stats` show compiles and pipeline creation)."""
        return self._executor

    # ----- running --------------------------------------------------------------------------------
    def run(
        self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: RunOptions | None = None
    ) -> list[np.ndarray]:
        """The outputs named (all when `output_names` is None or empty), as numpy arrays, in that order."""
        self._checker.check_missing(list(input_feed))
        host, fed = self._split(input_feed)
        names = self._wanted(output_names)
        if fed:
            results = self._run_device(host, fed, names, ())
            return [np.asarray(results[name]) for name in names]
        with self._lock:
            try:
                outputs = self._executor.run(host, names if len(names) < len(self._output_names) else None)
            except OnyxiaError as e:
                raise _run_error(e) from e
        return [outputs[name] for name in names]

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Callable[[list[np.ndarray] | None, Any, str], None],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """`run()` on another thread; `callback(results, user_data, error_text)` gets the outcome."""

        def work() -> None:
            try:
                results = self.run(output_names, input_feed, run_options)
            except Exception as e:  # handed to the callback, as onnxruntime reports a failed run
                callback(None, user_data, str(e))
                return
            callback(results, user_data, "")

        threading.Thread(target=work, name="onyxia.ort run_async", daemon=True).start()

    def run_with_ort_values(
        self,
        output_names: Sequence[str] | None,
        input_dict_ort_values: Mapping[str, OrtValue],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """`run()` with `OrtValue`s in and out; device inputs are copied in on the GPU, outputs come back on the host."""
        self._checker.check_missing(list(input_dict_ort_values))
        host, fed = self._split(input_dict_ort_values)
        names = self._wanted(output_names)
        results = self._run_device(host, fed, names, ())
        return [OrtValue(host=np.asarray(results[name])) for name in names]

    def io_binding(self) -> SessionIOBinding:
        return SessionIOBinding(self)

    def run_with_iobinding(self, iobinding: SessionIOBinding, run_options: RunOptions | None = None) -> None:
        """Run with the binding's inputs; its outputs bound to ``"webgpu"`` stay on the GPU."""
        self._checker.check_missing(list(iobinding.inputs))
        host, fed = self._split(iobinding.inputs)
        names = list(iobinding.outputs) or list(self._output_names)
        self._wanted(names)
        on_device = [name for name in names if iobinding.outputs.get(name, "cpu") == "webgpu"]
        iobinding.store(self._run_device(host, fed, names, on_device), names)

    # ----- helpers --------------------------------------------------------------------------------
    def _split(self, feed: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, GpuTensor]]:
        """Host arrays (onnxruntime's conversions and checks applied) and device tensors (checked by shape)."""
        overridden = sorted(set(feed) & self._overridable)
        if overridden:
            raise ort_error(
                NotImplemented,
                f"Overriding initializer '{overridden[0]}' is not supported by Onyxia",
                "Onyxia compiles the model's initializers into its plan as weights; feed only the inputs "
                "get_inputs() lists",
            )
        plain = {name: (v.numpy() if isinstance(v, OrtValue) and v.gpu is None else v) for name, v in feed.items()}
        devices = {name: v.gpu for name, v in plain.items() if isinstance(v, OrtValue) and v.gpu is not None}
        host = self._checker.convert({k: v for k, v in plain.items() if k not in devices})
        for name, tensor in devices.items():
            spec = self._checker.inputs.get(name)
            if spec is None:
                raise ort_error(InvalidArgument, f"Invalid input name: {name}")
            self._checker.check(spec, np.broadcast_to(np.zeros((), tensor.dtype.numpy), tensor.shape))
        return host, devices

    def _wanted(self, output_names: Sequence[str] | None) -> list[str]:
        if not output_names:
            return list(self._output_names)
        for name in output_names:
            if name not in self._output_names:
                raise ort_error(InvalidArgument, f"Invalid output name:{name}")
        return list(output_names)

    def _run_device(
        self, host: dict[str, np.ndarray], fed: dict[str, GpuTensor], names: list[str], on_device: Sequence[str]
    ) -> dict[str, np.ndarray | GpuTensor]:
        with self._lock:
            try:
                return run_on_device(self._executor, host, fed, names, on_device)
            except OnyxiaError as e:
                raise _run_error(e) from e


def _providers_or_fallback(
    providers: ProviderList, provider_options: Sequence[dict[Any, Any]] | None
) -> dict[str, dict[str, str]]:
    """onnxruntime's constructor retries with its fallback providers when the list itself is malformed
    (printing "EP Error"); Onyxia does the same, saying so as a warning instead of on stdout."""
    try:
        return normalize_providers(providers, provider_options)
    except ValueError as e:
        warnings.warn(
            f"EP Error {e} when using {providers}\nFalling back to ['{PROVIDER}'] and retrying.", stacklevel=3
        )
        return normalize_providers(None, None)


def _run_error(error: OnyxiaError) -> Exception:
    """An input the executor refuses (shapes that disagree on a shared dim...) is INVALID_ARGUMENT,
    anything else failing in a run onnxruntime's FAIL, Onyxia's message on the next line."""
    if isinstance(error, InputError):
        return ort_error(InvalidArgument, "Onyxia refused the inputs of this run", str(error))
    return ort_error(Fail, "Non-zero status code returned while running the Onyxia plan.", str(error))
