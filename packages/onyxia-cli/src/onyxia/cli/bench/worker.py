"""One engine measured in its own process, so its peak RSS is its own; prints the result as a JSON line.

Standalone on purpose (stdlib and numpy; onnxruntime imported by the ORT runner): onnxruntime-webgpu lives
in its own venv (it also provides the `onnxruntime` module) without onyxia, so the parent runs this file
by path with that venv's python. Onyxia's runner is imported only for the `onyxia` engine.

    python worker.py SPEC_JSON            # or: python -m onyxia.cli.bench.worker SPEC_JSON

SPEC_JSON: engine, model_path, model_dir, precision, prompt_ids, prefill_ids, decode_tokens, profile,
profile_steps, head_dim (the KV cache's last dim where the graph names it, as genai graphs do); for the
onyxia engine, stream_prompts (`--batch`: one prompt per stream) and streams (N > 1: the batched run alone,
`batched.run_batched`, instead of the protocol below). The last stdout line is the result (figures below,
or "error" and "unavailable").

A runner has `load() -> dict` (load figures, warm-up included), `first_token(ids) -> int` (a fresh
conversation: prefill `ids`, return the greedy next token), `decode(token, n) -> list[int]` (n greedy
one-token steps after what the cache holds) and `extras() -> dict`. Every engine is measured the same
way: time to first token with the short prompt, then decode steps after it, then a fresh long prefill.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from typing import Any, Protocol

import numpy as np

__all__ = ["EngineUnavailable", "OrtRunner", "Runner", "main", "measure", "peak_rss_bytes"]

ORT_PROVIDERS = {"ort-cpu": "CPUExecutionProvider", "ort-webgpu": "WebGpuExecutionProvider"}


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (package or device missing); reported, not raised to the user."""


class Runner(Protocol):
    """What `measure` drives (the module docstring gives the protocol): `OrtRunner` and `OnyxiaRunner`."""

    def load(self) -> dict[str, Any]: ...
    def first_token(self, ids: list[int]) -> int: ...
    def decode(self, token: int, n: int) -> list[int]: ...
    def extras(self) -> dict[str, Any]: ...


def measure(runner: Runner, spec: dict[str, Any]) -> dict[str, Any]:
    """The common protocol; times are wall-clock seconds on the host, ids included for cross-checks."""
    load_before = _load_average()
    result: dict[str, Any] = dict(runner.load())
    started = time.perf_counter()
    token = runner.first_token(spec["prompt_ids"])
    result["ttft_s"] = time.perf_counter() - started
    started = time.perf_counter()
    tokens = runner.decode(token, spec["decode_tokens"])
    decode_s = time.perf_counter() - started
    result.update(decode_s=decode_s, decode_tok_s=len(tokens) / decode_s, tokens=[token, *tokens])
    started = time.perf_counter()
    runner.first_token(spec["prefill_ids"])
    result["prefill_s"] = time.perf_counter() - started
    result["prefill_tok_s"] = len(spec["prefill_ids"]) / result["prefill_s"]
    result.update(runner.extras())
    result["peak_rss_bytes"] = peak_rss_bytes()
    result["load_average"] = [load_before, _load_average()]  # other work on the machine skews every figure
    return result


def _load_average() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def peak_rss_bytes() -> int:
    """This process's peak resident set: VmHWM where /proc has it, else ru_maxrss.

    Linux keeps ru_maxrss across execve, so a child forked from a big parent starts at the parent's
    size; VmHWM belongs to the address space exec created and so counts only this engine."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


class OrtRunner:
    """onnxruntime with one execution provider: the plain greedy loop, past fed back from present."""

    def __init__(self, model_path: str, provider: str, head_dim: int | None = None) -> None:
        self.model_path, self.provider, self.head_dim = model_path, provider, head_dim
        self.session: Any = None
        self.past: dict[str, np.ndarray] = {}
        self.length = 0

    def load(self) -> dict[str, Any]:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise EngineUnavailable(
                f"onnxruntime is not importable ({e}); install it into {sys.executable}'s environment with"
                " `pip install 'onyxia-cli[bench]'` (the .venv of `bash .ci/setup` has it)"
            ) from e
        if self.provider not in ort.get_available_providers():
            raise EngineUnavailable(f"onnxruntime {ort.__version__} has no {self.provider}")
        started = time.perf_counter()
        try:
            self.session = ort.InferenceSession(self.model_path, providers=[self.provider])
        except Exception as e:  # the EP could not create its device, or rejected the model
            raise EngineUnavailable(f"{self.provider}: {type(e).__name__}: {' '.join(str(e).split())[:500]}") from e
        loaded = time.perf_counter()
        if self.session.get_providers()[0] != self.provider:
            raise EngineUnavailable(f"{self.provider} not used; session providers {self.session.get_providers()}")
        self.first_token([2, 3])
        self.decode(4, 1)
        return {
            "load_compile_s": loaded - started,
            "warmup_s": time.perf_counter() - loaded,
            "runtime_version": ort.__version__,
            "provider": self.provider,
        }

    def first_token(self, ids: list[int]) -> int:
        self.past = {i.name: np.zeros(_empty_past(i.shape, self.head_dim), np.float32) for i in self._past_inputs()}
        self.length = 0
        return self._step(ids)

    def decode(self, token: int, n: int) -> list[int]:
        tokens = []
        for _ in range(n):
            token = self._step([token])
            tokens.append(token)
        return tokens

    def extras(self) -> dict[str, Any]:
        return {}

    def _past_inputs(self) -> list[Any]:
        return [i for i in self.session.get_inputs() if i.name.startswith("past_key_values")]

    def _step(self, ids: list[int]) -> int:
        total = self.length + len(ids)
        feeds: dict[str, np.ndarray] = {
            "input_ids": np.array([ids], np.int64),
            "attention_mask": np.ones((1, total), np.int64),
            "position_ids": np.arange(self.length, total, dtype=np.int64)[None],
            **self.past,
        }
        names = {i.name for i in self.session.get_inputs()}
        outputs = [o.name for o in self.session.get_outputs()]
        values = dict(zip(outputs, self.session.run(outputs, {k: v for k, v in feeds.items() if k in names})))
        self.past = {name: values[name.replace("past_key_values", "present")] for name in self.past}
        self.length = total
        return int(np.argmax(values["logits"][0, -1]))


def _empty_past(shape: list[Any], head_dim: int | None = None) -> tuple[int, ...]:
    """[batch, kv_heads, past, head_dim] with batch 1 and past 0 (head_dim from the spec where the graph
    names it); named dims elsewhere would be a new layout."""
    dims = [1 if i == 0 else 0 if i == 2 else d for i, d in enumerate(shape)]
    if len(dims) == 4 and isinstance(dims[3], str) and head_dim:
        dims[3] = head_dim
    if not all(isinstance(d, int) for d in dims):
        raise EngineUnavailable(f"past_key_values shape {shape}: expected [batch, kv_heads, past, head_dim]")
    return tuple(dims)


def _runner(spec: dict[str, Any]) -> Runner:
    engine = spec["engine"]
    if engine in ORT_PROVIDERS:
        return OrtRunner(spec["model_path"], ORT_PROVIDERS[engine], spec.get("head_dim"))
    if engine == "onyxia":
        from onyxia.cli.bench.onyxia_runner import OnyxiaRunner

        return OnyxiaRunner(
            spec["model_dir"],
            spec["precision"],
            spec.get("profile", False),
            spec.get("profile_steps", 4),
            spec.get("lm_head", "exact"),
            stream_prompts=spec.get("stream_prompts"),
            decode_tokens=spec.get("decode_tokens", 0),  # only batched runs (stream_prompts) decode here
        )
    raise EngineUnavailable(f"unknown engine {engine!r}")


def main(argv: list[str] | None = None) -> int:
    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    try:
        if spec.get("streams", 1) > 1:
            from onyxia.cli.bench.batched import run_batched

            result = {"status": "ok", **run_batched(spec)}
        else:
            result = {"status": "ok", **measure(_runner(spec), spec)}
    except EngineUnavailable as e:
        result = {"status": "unavailable", "reason": str(e)}
    except Exception as e:
        traceback.print_exc()
        result = {"status": "failed", "reason": f"{type(e).__name__}: {' '.join(str(e).split())[:500]}"}
    print(json.dumps({"engine": spec["engine"], "precision": spec["precision"], **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
