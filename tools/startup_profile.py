"""Where a new process's time goes, from interpreter start to its first result (issue 24, "Start-up").

A user of `onyxia.ort` pays start-up on every process: imports, opening the device, parse + compile
(or the plan cache's load), `load_model` (buffers, weights, pipelines) and the first run. This tool
times each stage in a fresh subprocess, so nothing the parent imported or warmed is shared:

    .venv/bin/python tools/startup_profile.py MODEL.onnx [--input NAME=FILE.npy] [--dim NAME=VALUE]
    .venv/bin/python tools/startup_profile.py --packaged vision        # every packaged vision model
    .venv/bin/python tools/startup_profile.py MODEL.onnx --importtime   # + `python -X importtime` top list
    .venv/bin/python tools/startup_profile.py MODEL.onnx --cprofile 25  # + cProfile's top 25 (cumulative)
    .venv/bin/python tools/startup_profile.py --packaged vision --via cache  # parse + compile from the plan cache
    .venv/bin/python tools/startup_profile.py --packaged vision --via ort  # as onyxia.ort users start

"python start" is the wall time from the parent's spawn to the child's first statement; every other
stage is measured inside the child. Inputs the command line does not give are random, shaped from the
model (named dims from ``--dim``, else 1); ``--packaged`` feeds each model the inputs its package's
own pre-processing makes (tests/packaged_models), so the shapes are the ones users run. Each process
is started ``--repeat`` times (default 2) and the last is reported: the first may compile shaders the
driver's on-disk cache has not seen yet, and writes the bytecode the later ones import (see `_child_env`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools/startup package, however this is run

from startup.stages import child_api, child_cache, child_ort, prepare

REPO = Path(__file__).resolve().parents[1]
STAGES = ("python start", "imports", "Runtime()", "compile", "load_model", "first run", "second run")


class ChildFailed(Exception):
    """The child's stderr; the table shows its last line and goes on with the next model."""

    def __init__(self, stderr: str) -> None:
        super().__init__(stderr[-4000:])
        self.last_line = (stderr.strip().splitlines() or ["(no output)"])[-1]


def _spawn(
    model: Path,
    inputs: Path | None,
    dims: dict[str, int],
    extra: list[str],
    via: str = "api",
    caches: dict[str, str] | None = None,
) -> tuple[dict[str, float], str]:
    argv = [sys.executable, *extra, __file__, "--child", str(model), f"--via={via}"]
    if inputs is not None:
        argv += ["--inputs-npz", str(inputs)]
    argv += [f"--dim={k}={v}" for k, v in dims.items()]
    spawned = time.time()
    done = subprocess.run(
        argv, capture_output=True, text=True, cwd=REPO, env={**_child_env(), **(caches or {})}, check=False
    )
    if done.returncode != 0:
        raise ChildFailed(done.stderr)
    stamps = json.loads(done.stdout.strip().splitlines()[-1])
    order = ["start", *STAGES[1:]]
    seconds = {"python start": stamps["start"] - spawned}
    for previous, stage in itertools.pairwise(order):
        seconds[stage] = stamps[stage] - stamps[previous]
    seconds["to first result"] = stamps["first run"] - spawned
    return seconds, done.stderr


def _fresh_caches(folder: Path) -> dict[str, str]:
    """Empty driver shader and Onyxia plan caches for one model's processes (a new user's machine)."""
    (folder / "mesa").mkdir(parents=True)
    (folder / "onyxia").mkdir()
    return {"MESA_SHADER_CACHE_DIR": str(folder / "mesa"), "ONYXIA_CACHE_DIR": str(folder / "onyxia")}


def _child_env() -> dict[str, str]:
    """The environment with bytecode caching on, as an installed package runs (pip compiles at install):
    PYTHONDONTWRITEBYTECODE would otherwise charge every import its compile. The bytecode goes under a
    prefix outside the tree unless PYTHONPYCACHEPREFIX says where."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "onyxia-startup-pycache"))
    return env


def _row(name: str, seconds: dict[str, float]) -> str:
    cells = " ".join(f"{seconds[s]:7.2f}" for s in (*STAGES, "to first result"))
    budget = 2.0 + seconds["second run"]
    verdict = "ok" if seconds["to first result"] <= budget else f"over {budget:.2f}"
    return f"{name:22s} {cells}  {verdict}"


def _header() -> str:
    short = ("py", "imports", "Runtime", "compile", "load", "run1", "run2", "total")
    return f"{'model':22s} " + " ".join(f"{s:>7s}" for s in short) + "  (2 s + run2)"


def _importtime(stderr: str, top: int) -> str:
    rows = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (p.strip() for p in line[len("import time:") :].split("|"))
            if cumulative.isdigit():
                rows.append((int(cumulative), name))
    rows.sort(reverse=True)
    return "\n".join(f"  {us / 1e3:8.1f} ms  {name}" for us, name in rows[:top])


def _packaged(domain: str, workdir: Path) -> list[tuple[str, Path, Path | None]]:
    """(name, model, saved inputs) for the packaged models of `domain`, inputs from the package's pre-processing."""
    import numpy as np

    sys.path[:0] = [str(REPO / "tests" / "packaged_models"), str(REPO / "tests")]
    from packaged_table import PASSING  # type: ignore[import-not-found]  # tests/packaged_models

    found: list[tuple[str, Path, Path | None]] = []
    for entry in PASSING:
        if entry.domain != domain:
            continue
        path = entry.path()
        saved = workdir / f"{entry.name}.npz"
        np.savez(saved, **entry.inputs(path))
        found.append((entry.name, path, saved))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="an .onnx file")
    parser.add_argument("--packaged", metavar="DOMAIN", help="every packaged model of DOMAIN (vision, audio, text)")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--repeat", type=int, default=2, help="processes per model; the last is reported")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports (-X importtime)")
    parser.add_argument("--cprofile", type=int, default=0, metavar="N", help="also print cProfile's top N")
    parser.add_argument("--json", type=Path, help="write every model's breakdown here")
    parser.add_argument(
        "--via",
        choices=("api", "cache", "ort"),
        default="api",
        help="api: load_and_parse_model + CompilerPipeline + Runtime.load_model; cache: the plan cache's "
        "compile_cached + Runtime.load_model; ort: onyxia.ort.InferenceSession (its plan cache included)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="per model, first a process with empty shader and plan caches (MESA_SHADER_CACHE_DIR, ONYXIA_CACHE_DIR "
        "in a fresh folder: a new user's first run), then --repeat warm ones over those caches; both rows printed",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--inputs-npz", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in args.dim)}
    if args.child:
        child = {"ort": child_ort, "cache": child_cache}.get(args.via, child_api)
        print(json.dumps(child(args.model, args.inputs_npz, dims)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.packaged:
            models = _packaged(args.packaged, work)
        elif args.model:
            import numpy as np

            saved = None
            if args.input:
                saved = work / "inputs.npz"
                np.savez(saved, **{k: np.load(v) for k, v in (i.split("=", 1) for i in args.input)})
            models = [(Path(args.model).stem, Path(args.model), saved)]
        else:
            parser.error("give a MODEL or --packaged DOMAIN")
        report = {}
        print(_header())
        for name, model, inputs in models:
            seconds: dict[str, float] = {}
            inputs, model_dims = prepare(model, inputs, dims, work) if args.via == "cache" else (inputs, dims)
            caches = _fresh_caches(work / "caches" / name) if args.cold else {}
            try:
                if args.cold:
                    cold, _stderr = _spawn(model, inputs, model_dims, [], args.via, caches)
                    report[f"{name} (cold)"] = cold
                    print(_row(f"{name} (cold)", cold), flush=True)
                for _ in range(max(1, args.repeat)):
                    seconds, _stderr = _spawn(model, inputs, model_dims, [], args.via, caches)
            except ChildFailed as e:
                print(f"{name:22s} failed: {e.last_line}", flush=True)
                continue
            report[name] = seconds
            print(_row(name, seconds), flush=True)
            if args.importtime:
                _, stderr = _spawn(model, inputs, model_dims, ["-X", "importtime"], args.via)
                print(_importtime(stderr, 25))
            if args.cprofile:
                _cprofile(model, inputs, model_dims, args.cprofile, work, args.via)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))
    return 0


def _cprofile(model: Path, inputs: Path | None, dims: dict[str, int], top: int, work: Path, via: str) -> None:
    import pstats

    out = work / "profile.out"
    _spawn(model, inputs, dims, ["-m", "cProfile", "-o", str(out)], via)
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    raise SystemExit(main())
