"""Parent side of the engines: which Python runs each one's worker, and running it in a child process.

Onyxia and onnxruntime's CPU EP run under this interpreter. onnxruntime's WebGPU EP comes from the
`onnxruntime-webgpu` package, which also provides the `onnxruntime` module and so gets its own venv
(created on first use under the bench cache, `venv-ort-webgpu`, with uv from PATH or beside this
interpreter). An engine that cannot run (no uv, no package, no device) comes back as {"status": "unavailable", "reason": ...}, never as an exception.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from onyxia.cli.bench import worker

__all__ = ["ENGINES", "WEBGPU_PACKAGES", "find_uv", "run_engine", "webgpu_python"]

ENGINES = ("onyxia", "ort-cpu", "ort-webgpu")
WEBGPU_PACKAGES = ("onnxruntime-webgpu", "numpy")
_VENV = "venv-ort-webgpu"
_INSTALL_TIMEOUT_S = 900
_TAIL = 1500


def run_engine(engine: str, spec: dict[str, Any], cache: Path, timeout_s: float) -> dict[str, Any]:
    """Run `engine`'s worker on `spec` in a child process; its JSON result (or why there is none)."""
    base = {"engine": engine, "precision": spec["precision"]}
    try:
        python = webgpu_python(cache) if engine == "ort-webgpu" else Path(sys.executable)
    except worker.EngineUnavailable as e:
        return {**base, "status": "unavailable", "reason": str(e)}
    command = [str(python), "-P", str(Path(worker.__file__).resolve()), json.dumps({**spec, "engine": engine})]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=_child_env(engine))
    except subprocess.TimeoutExpired:
        return {**base, "status": "failed", "reason": f"timed out after {timeout_s:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        reason = f"exit status {proc.returncode}, no result; stderr: {proc.stderr[-_TAIL:].strip()}"
        return {**base, "status": "failed", "reason": reason}
    result: dict[str, Any] = json.loads(lines[-1])
    if result.get("status") == "failed":
        result["stderr"] = proc.stderr[-_TAIL:]
    return result


def webgpu_python(cache: Path) -> Path:
    """The venv's python with onnxruntime-webgpu importable; created (uv venv + uv pip install) when missing."""
    venv = cache / _VENV
    python = venv / "bin" / "python"
    probe = "import onnxruntime, numpy; print(onnxruntime.__version__)"
    if python.is_file() and _succeeds([str(python), "-c", probe]):
        return python
    uv = find_uv()
    if uv is None:
        raise worker.EngineUnavailable(
            "no `uv` on PATH or beside this Python; it creates the onnxruntime-webgpu venv (`pip install uv`)"
        )
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    _install([uv, "venv", "--allow-existing", "--python", version, str(venv)], "creating the venv")
    _install([uv, "pip", "install", "--python", str(python), *WEBGPU_PACKAGES], "installing onnxruntime-webgpu")
    if not _succeeds([str(python), "-c", probe]):
        raise worker.EngineUnavailable(f"onnxruntime-webgpu installed in {venv} but not importable")
    return python


def find_uv() -> str | None:
    """uv on PATH, else the one installed beside this interpreter: `.venv/bin/onyxia bench` run without
    activating the venv (as the README does) still finds the uv that `.ci/setup` put in `.venv/bin`."""
    found = shutil.which("uv")
    if found is not None:
        return found
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _install(command: list[str], what: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise worker.EngineUnavailable(f"{what}: {e}") from e
    if proc.returncode:
        raise worker.EngineUnavailable(f"{what} failed: {(proc.stderr or proc.stdout)[-_TAIL:].strip()}")


def _succeeds(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _child_env(engine: str) -> dict[str, str]:
    """The parent's environment; the WebGPU venv's child drops paths that could shadow its onnxruntime."""
    env = dict(os.environ)
    if engine == "ort-webgpu":
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
    return env
