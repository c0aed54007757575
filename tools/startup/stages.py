"""The child side of `tools/startup_profile.py`: one fresh process, one model, a time stamp per stage.

Each `child_*` takes its first stamp before importing anything heavy, so the parent's "python start"
and the child's stages add up to the process's whole time to its first result. `prepare` writes the
graph and feeds a `--via cache` child loads, and `random_feeds` shapes what the command line did not give.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def child_ort(model: str, inputs_npz: str | None, dims: dict[str, int]) -> dict[str, float]:
    """The `onyxia.ort` user's path: the session's constructor is compile (or the plan cache's load)
    plus `load_model`, told apart by timing the shared runtime's `load_model`."""
    stamps = {"start": time.time()}
    import numpy as np

    import onyxia.ort as ort
    from onyxia.ort.device import shared_runtime

    stamps["imports"] = time.time()
    runtime = shared_runtime()
    stamps["Runtime()"] = time.time()
    loading = runtime.load_model
    spent = [0.0]

    def timed_load(*args: Any, **kwargs: Any) -> Any:
        began = time.time()
        try:
            return loading(*args, **kwargs)
        finally:
            spent[0] += time.time() - began

    setattr(runtime, "load_model", timed_load)  # noqa: B010 - the bound method, replaced on this instance
    session = ort.InferenceSession(model)
    done = time.time()
    stamps["compile"], stamps["load_model"] = done - spent[0], done
    given = dict(np.load(inputs_npz)) if inputs_npz else {}
    rng = np.random.default_rng(0)
    for arg in session.get_inputs():
        if arg.name not in given:
            shape = [d if isinstance(d, int) else dims.get(str(d), 1) for d in arg.shape]
            dtype = np.float32 if arg.type == "tensor(float)" else np.int64
            given[arg.name] = rng.standard_normal(shape).astype(dtype) if dtype is np.float32 else np.ones(shape, dtype)
    session.run(None, given)
    stamps["first run"] = time.time()
    session.run(None, given)
    stamps["second run"] = time.time()
    return stamps


def child_api(model: str, inputs_npz: str | None, dims: dict[str, int]) -> dict[str, float]:
    stamps = {"start": time.time()}
    import numpy as np

    import onyxia.compiler
    import onyxia.onnx
    import onyxia.operators
    from onyxia.runtime import Runtime, compiling_for

    stamps["imports"] = time.time()
    runtime = Runtime()
    stamps["Runtime()"] = time.time()
    graph = onyxia.onnx.load_and_parse_model(Path(model))
    feeds = dict(np.load(inputs_npz)) if inputs_npz else {}
    feeds = random_feeds(graph, feeds, dims)
    bound = bind_dims(graph, feeds, dims)
    with compiling_for(runtime):
        compiled = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(graph, bound)
    stamps["compile"] = time.time()
    executor = runtime.load_model(compiled)
    stamps["load_model"] = time.time()
    executor.run(feeds)
    stamps["first run"] = time.time()
    executor.run(feeds)
    stamps["second run"] = time.time()
    return stamps


def child_cache(model: str, inputs_npz: str | None, dims: dict[str, int]) -> dict[str, float]:
    """The plan cache's path (`onyxia.cli.plan_cache.compile_cached`, what `onyxia.ort` compiles through):
    on a hit nothing is parsed or compiled, so the feeds and the dims come whole from the parent."""
    stamps = {"start": time.time()}
    import numpy as np

    from onyxia.cli.plan_cache import compile_cached
    from onyxia.runtime import Runtime

    stamps["imports"] = time.time()
    runtime = Runtime()
    stamps["Runtime()"] = time.time()
    compiled = compile_cached(Path(model), dims, runtime)
    stamps["compile"] = time.time()
    executor = runtime.load_model(compiled)
    stamps["load_model"] = time.time()
    feeds = dict(np.load(inputs_npz)) if inputs_npz else {}
    executor.run(feeds)
    stamps["first run"] = time.time()
    executor.run(feeds)
    stamps["second run"] = time.time()
    return stamps


def prepare(model: Path, inputs: Path | None, dims: dict[str, int], work: Path) -> tuple[Path, dict[str, int]]:
    """Every input saved (random where not given) and every named dim bound, parsed here in the parent so
    the cache child can start from a hit."""
    import numpy as np

    import onyxia.onnx

    graph = onyxia.onnx.load_and_parse_model(model)
    feeds = random_feeds(graph, dict(np.load(inputs)) if inputs else {}, dims)
    saved = work / f"{model.stem}.feeds.npz"
    np.savez(saved, **feeds)  # type: ignore[arg-type]
    return saved, bind_dims(graph, feeds, dims)


def random_feeds(graph: Any, given: dict[str, Any], dims: dict[str, int]) -> dict[str, Any]:
    """`given` plus a random array for every other graph input, named dims from `dims` (else 1)."""
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = dict(given)
    for tid in graph.inputs:
        tensor = graph.tensor(tid)
        if tensor.name in feeds:
            continue
        shape = [d if isinstance(d, int) else dims.get(dim_name(d), 1) for d in getattr(tensor.shape, "dims", ())]
        dtype = np.dtype(tensor.dtype.numpy)
        if dtype.kind == "f":
            feeds[tensor.name] = rng.standard_normal(shape).astype(dtype)
        else:  # small non-negative integers are valid indices, lengths and booleans alike
            feeds[tensor.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def dim_name(dim: object) -> str:
    return str(dim.args[0]) if getattr(dim, "op", "") == "name" else str(dim)  # type: ignore[attr-defined]


def bind_dims(graph: Any, feeds: dict[str, Any], dims: dict[str, int]) -> dict[str, int]:
    """Named dims bound from the feeds' shapes (what `onyxia run` and `onyxia.ort` do)."""
    bound = dict(dims)
    for tid in graph.inputs:
        tensor = graph.tensor(tid)
        for dim, size in zip(getattr(tensor.shape, "dims", ()), feeds[tensor.name].shape):  # type: ignore[attr-defined]
            if getattr(dim, "op", "") == "name":
                bound.setdefault(dim_name(dim), int(size))
    return bound


# ----- the parent: spawn, time, summarise -----------------------------------------------------------
