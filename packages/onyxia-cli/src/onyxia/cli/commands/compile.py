"""`onyxia compile MODEL`: compile without a GPU, summarise the plan, and optionally dump every pass.

``--dump-dir DIR`` writes the graph as loaded (``000-input``) and after every pass run that changed
it (``NNN-<pass>``, NNN its place in the pass history) as ONNX plus the printed graph with an op
histogram, then ``index.txt`` (every run, changed or not, and the files it wrote) and ``stats.txt``
(the per-pass table). Initializers over 1 KiB go once into a shared ``weights.bin`` that every
``.onnx`` there references as external data, so a 1 GB model costs 1 GB per dump, not per pass;
``onnx.load`` and onnxruntime read the files in place. Fused Onyxia ops keep their own domain, so
only dumps of plain ONNX ops run in onnxruntime. The dump is built in a temporary directory beside
DIR and renamed into place: bad input leaves nothing behind, and a compile error keeps the passes
that ran (the error is in ``index.txt``), which is what one debugs from. An existing DIR is replaced
only when it is empty or an earlier dump.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from rich.console import Console
from rich.markup import escape

from onyxia.cli.common import (
    BUILTIN_MODEL_NAME,
    add_dim_argument,
    add_model_argument,
    deferred_note,
    demotion_note,
    format_bytes,
    load_graph,
    model_path,
    operator_registry,
    parse_dims,
    variant_note,
)
from onyxia.core import InputError, IrGraph, OnyxiaError, TensorRole

if TYPE_CHECKING:
    import onnx

    from onyxia.compiler.stats import PassRun, PassStats
    from onyxia.core import CompiledModel, PassSet

__all__ = ["EXTERNAL_THRESHOLD", "add_parser", "run"]

NAME = "compile"
EXTERNAL_THRESHOLD = 1024  # bytes: larger initializers are written once, to weights.bin
_MARKER = "onyxia compile dump"  # first line of index.txt: marks a directory we may replace


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        NAME, help="compile the model (no GPU needed); summarise the plan, dump the graph after every pass"
    )
    add_model_argument(parser)
    add_dim_argument(parser)
    parser.add_argument(
        "--dump-dir", type=Path, default=None, metavar="DIR", help="write the graph after each pass (ONNX + text)"
    )
    parser.add_argument("--stats", action="store_true", help="print the per-pass statistics table")
    parser.add_argument(
        "--generation",
        action="store_true",
        help="add the LLM session's generation passes (last-position logits, next_token, in-place KV cache)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.compiler import CompilerPipeline

    dims = parse_dims(args.dim)
    title = BUILTIN_MODEL_NAME if args.model is None else str(args.model)
    dump = _Dump(args.dump_dir, title, dims) if args.dump_dir is not None else None  # a bad DIR fails first
    pipeline = CompilerPipeline(operator_registry())
    try:
        with model_path(args.model) as path:
            graph = load_graph(path)
        if args.generation:
            pipeline.add_pass_set(_generation(graph, str(path), dims))
        if dump is not None:
            dump.start(graph)
            pipeline.observe(dump.observe)
        start = time.perf_counter()
        model = pipeline.compile(graph, dims)
    except OnyxiaError as e:
        if dump is not None and dump.started and not isinstance(e, InputError):
            dump.finish(pipeline.stats, error=e)  # the passes before the failure are what one debugs from
            e.add_note(f"the passes that ran are dumped in {args.dump_dir}")
        elif dump is not None:
            dump.abort()
        raise
    except BaseException:
        if dump is not None:
            dump.abort()
        raise
    elapsed = (time.perf_counter() - start) * 1e3
    if dump is not None:
        dump.finish(pipeline.stats)
    console.print(_summary(title, graph, model, pipeline.runs, elapsed))
    if args.stats:
        from onyxia.compiler.stats import format_stats

        console.print(format_stats(pipeline.stats), markup=False)
    if dump is not None:
        console.print(f"dumped {dump.files} files to {escape(str(args.dump_dir))}")
    return 0


def _generation(graph: IrGraph, where: str, dims: dict[str, int]) -> PassSet:
    """The pass set `onyxia generate` compiles with, for a model that follows the LLM conventions (one slot of
    the default max length; its GroupQueryAttention caches' past length is then that capacity, in `dims`)."""
    from onyxia.cli.llm.generation_passes import generation_passes
    from onyxia.cli.llm.loading import DEFAULT_MAX_LENGTH
    from onyxia.cli.llm.resident_cache import shared_buffer_dims
    from onyxia.cli.llm.signature import read_signature

    signature = read_signature(graph, where)
    dims.update({k: v for k, v in shared_buffer_dims(graph, signature.kv, DEFAULT_MAX_LENGTH).items() if k not in dims})
    return generation_passes(signature.logits, signature.kv, DEFAULT_MAX_LENGTH)


def _summary(title: str, graph: IrGraph, model: CompiledModel, runs: list[PassRun], ms: float) -> str:
    after = runs[-1].nodes_after if runs else len(graph)
    weights = sum(t.nbytes for t in model.tensors.values() if t.role is TensorRole.WEIGHT and isinstance(t.nbytes, int))
    return (
        f"[bold]{escape(title)}[/]: {len(graph)} nodes -> {after} after {len(runs)} pass runs; "
        f"{len(model.operations)} GPU ops, {model.dispatch_count} dispatches, {len(model.shaders)} shaders, "
        f"{len(model.tensors)} buffers, {format_bytes(weights)} of weights (compiled in {ms:.0f} ms)"
        + deferred_note(model)
        + variant_note(model)
        + demotion_note(model)
    )


class _Dump:
    """The ``--dump-dir`` writer: an observer of the pipeline that writes into a temporary directory."""

    def __init__(self, target: Path, title: str, dims: dict[str, int]) -> None:
        self.target = target
        self.files = 0
        self.started = False
        self._check_target()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            self.tmp.chmod(0o755)  # mkdtemp makes it private; the dump is an ordinary directory
        except OSError as e:
            raise InputError(f"--dump-dir '{target}': cannot create it: {e.strerror or e}") from e
        bound = ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "none"
        self._index = [
            f"{_MARKER} of {title}",
            f"dims: {bound}",
            "",
            _row("run", "pass", "stage", "changed", "rewrites", "ms", "nodes", "files"),
        ]
        self._weights: BinaryIO | None = None
        self._stored: dict[int, tuple[int, int]] = {}  # id(source value) -> (offset, length) in weights.bin
        self._alive: list[object] = []  # keeps each source value alive so its id is never reused

    def start(self, graph: IrGraph) -> None:
        written = self.write(0, "input", graph, None)
        self._index.append(_row("000", "(as loaded)", "", "", "", "", str(len(graph)), written))
        self.started = True

    def observe(self, run: PassRun, graph: IrGraph) -> None:
        written = self.write(run.index, run.name, graph, run) if run.changed else "unchanged"
        changed = "yes" if run.changed else "no"
        cells = (run.name, run.stage.name, changed, str(run.rewrites), f"{run.ms:.1f}", str(run.nodes_after))
        self._index.append(_row(f"{run.index:03d}", *cells, written))

    def write(self, index: int, name: str, graph: IrGraph, run: PassRun | None) -> str:
        """``NNN-<name>.txt`` and ``.onnx``; returns what the index should say about them."""
        from onyxia.onnx import to_onnx

        stem = f"{index:03d}-{name}"
        note = f"{stem}.onnx, {stem}.txt"
        text = _describe(graph, run)
        try:
            model = to_onnx(graph)
        except OnyxiaError as e:  # a graph ONNX cannot express (yet) still gets its text dump
            note = f"{stem}.txt (no ONNX: {e})"
            text = f"# no ONNX: {e}\n{text}"
            model = None
        try:
            if model is not None:
                _declare_domains(model)
                self._externalize(model, graph)
                (self.tmp / f"{stem}.onnx").write_bytes(model.SerializeToString())
                self.files += 1
            (self.tmp / f"{stem}.txt").write_text(text)
            self.files += 1
        except OSError as e:
            self.abort()
            raise InputError(f"--dump-dir '{self.target}': cannot write {stem}: {e.strerror or e}") from e
        return note

    def finish(self, stats: list[PassStats], error: OnyxiaError | None = None) -> None:
        from onyxia.compiler.stats import format_stats

        lines = [*self._index, ""]
        if self._weights is not None:
            lines.append(f"weights.bin: {len(self._stored)} initializers over {EXTERNAL_THRESHOLD} B, stored once")
        if error is not None:
            lines += [f"compile failed: {type(error).__name__}: {error}", *getattr(error, "__notes__", [])]
            lines += [error.compiler_pass] if error.compiler_pass else []
        try:
            if self._weights is not None:
                self._weights.close()
            (self.tmp / "index.txt").write_text("\n".join(lines) + "\n")
            (self.tmp / "stats.txt").write_text(format_stats(stats) + "\n")
            self.files += 2
            if self.target.exists():
                trash = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old.", dir=self.target.parent))
                self.target.rename(trash / "dump")
                shutil.rmtree(trash)
            self.tmp.rename(self.target)
        except OSError as e:
            self.abort()
            raise InputError(f"--dump-dir '{self.target}': cannot write it: {e.strerror or e}") from e

    def abort(self) -> None:
        if self._weights is not None:
            self._weights.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _check_target(self) -> None:
        target = self.target
        if not target.exists():
            return
        if not target.is_dir():
            raise InputError(f"--dump-dir '{target}' exists and is not a directory")
        index = target / "index.txt"
        ours = index.is_file() and index.read_text(errors="replace").startswith(_MARKER)
        if any(target.iterdir()) and not ours:
            raise InputError(f"--dump-dir '{target}' is not empty and holds no earlier dump; choose another")

    def _externalize(self, model: onnx.ModelProto, graph: IrGraph) -> None:
        """Move initializers over the threshold into weights.bin, each source value once per dump dir.

        A value is keyed by the identity of the graph's `TensorValue` or folded array behind it: the
        pipeline edits one graph in place and values are immutable, so a weight stays one object
        through every pass and is written once, without hashing gigabytes per pass."""
        from onnx.external_data_helper import set_external_data

        sources = {t.name: t.initializer if t.initializer is not None else t.value for t in graph.tensors}
        for proto in model.graph.initializer:
            if len(proto.raw_data) <= EXTERNAL_THRESHOLD:
                continue
            source = sources.get(proto.name)
            key = id(source) if source is not None else id(proto)
            if key not in self._stored or source is None:
                self._stored[key] = self._append(proto.raw_data)
                self._alive.append(source)
            offset, length = self._stored[key]
            set_external_data(proto, "weights.bin", offset=offset, length=length)
            proto.data_location = proto.EXTERNAL
            proto.ClearField("raw_data")

    def _append(self, data: bytes) -> tuple[int, int]:
        if self._weights is None:
            self._weights = (self.tmp / "weights.bin").open("wb")
            self.files += 1
        offset = self._weights.tell()
        self._weights.write(data)
        return offset, len(data)


def _row(run: str, name: str, stage: str, changed: str, rewrites: str, ms: str, nodes: str, files: str) -> str:
    """One line of index.txt's table of pass runs."""
    return f"{run:<3}  {name:<28} {stage:<12}  {changed:<7} {rewrites:>8} {ms:>8}  {nodes:>5}  {files}"


def _declare_domains(model: onnx.ModelProto) -> None:
    """Fused ops live in Onyxia's own domain, which the source model never imported: declare it
    (version 1) so checkers and onnxruntime read the dump as a model that merely lacks those kernels."""
    import onnx

    declared = {opset.domain for opset in model.opset_import}
    for domain in sorted({node.domain for node in model.graph.node} - declared):
        model.opset_import.append(onnx.helper.make_opsetid(domain, 1))


def _describe(graph: IrGraph, run: PassRun | None) -> str:
    """The printed graph under a header: which pass left it so, and its op histogram."""
    ops = Counter(node.qualified_op for node in graph.nodes)
    histogram = ", ".join(f"{op} x{n}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
    if run is None:
        head = f"# graph as loaded: {len(graph)} nodes"
    else:
        head = (
            f"# after pass {run.name} ({run.stage.name}, run {run.index}): {run.rewrites} rewrite(s), "
            f"{run.nodes_before} -> {run.nodes_after} nodes, {run.ms:.1f} ms"
        )
    return f"{head}\n# ops: {histogram or 'none'}\n\n{graph}\n"
