"""Embedding throughput: Onyxia (`EmbeddingModel`) against onnxruntime's CPU provider on the same directory.

    python tools/embedding_fixture/make_fixture.py --bench /tmp/embed-bench      # in the fixture venv
    .venv/bin/python tools/embedding_fixture/bench.py /tmp/embed-bench/minilm-l6-shape [--texts 64]

Both sides get the same token ids, batched the same way (sorted by length, at most 32 rows, each batch
right-padded to its longest) and pooled by the same host code, so the figures compare the encoders. Texts are
seeded draws of 4 to 40 corpus words. Prints load time, one-text latency (median of 5) and texts/s for the
whole set (best of 3), and the worst cosine between the two sides' vectors.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime

from onyxia.cli.embeddings import EmbeddingModel, normalize, pool

__all__ = ["main"]

_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "rain",
    "fell",
    "on",
    "harbour",
    "boats",
    "pier",
    "retrieval",
    "pipeline",
    "embeds",
]


def _texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, int(rng.integers(4, 41)))) for _ in range(count)]


def _ort_encode(session: onnxruntime.InferenceSession, model: EmbeddingModel, ids: list[list[int]]) -> np.ndarray:
    out = np.empty((len(ids), model.dimension), np.float32)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    names = {i.name for i in session.get_inputs()}
    for start in range(0, len(order), model.max_batch):
        rows = order[start : start + model.max_batch]
        longest = max(len(ids[i]) for i in rows)
        padded = np.zeros((len(rows), longest), np.int64)
        mask = np.zeros_like(padded)
        for r, i in enumerate(rows):
            padded[r, : len(ids[i])], mask[r, : len(ids[i])] = ids[i], 1
        feeds = {"input_ids": padded, "attention_mask": mask, "token_type_ids": np.zeros_like(padded)}
        (hidden,) = session.run(["last_hidden_state"], {k: v for k, v in feeds.items() if k in names})
        out[rows] = pool(model.directory.pooling, hidden, mask)
    return normalize(out) if model.directory.normalize else out


def _best(run: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--texts", type=int, default=64)
    args = parser.parse_args()
    start = time.perf_counter()
    model = EmbeddingModel.from_pretrained(args.model_dir)
    loaded = time.perf_counter() - start
    session = onnxruntime.InferenceSession(str(model.directory.onnx), providers=["CPUExecutionProvider"])
    texts = _texts(args.texts)
    ids = model.tokenize(texts)
    ours, theirs = model.encode(ids).vectors, _ort_encode(session, model, ids)
    cosine = np.sum(ours * theirs, 1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    one = [ids[0]]
    latency = {
        "onyxia": statistics.median(_best(lambda: model.encode(one), 1) for _ in range(5)),
        "onnxruntime": statistics.median(_best(lambda: _ort_encode(session, model, one), 1) for _ in range(5)),
    }
    whole = {
        "onyxia": _best(lambda: model.encode(ids), 3),
        "onnxruntime": _best(lambda: _ort_encode(session, model, ids), 3),
    }
    tokens = sum(len(t) for t in ids)
    print(
        f"{args.model_dir.name}: {len(ids)} texts, {tokens} tokens, width {model.dimension}; Onyxia load {loaded:.1f} s"
    )
    for side in ("onyxia", "onnxruntime"):
        print(
            f"  {side:12s} one text {1e3 * latency[side]:7.1f} ms   {len(ids)} texts {whole[side]:6.3f} s = "
            f"{len(ids) / whole[side]:7.1f} texts/s ({tokens / whole[side]:.0f} tokens/s)"
        )
    print(f"  worst cosine between the two: {cosine.min():.7f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
