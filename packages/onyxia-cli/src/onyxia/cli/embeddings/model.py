"""`EmbeddingModel`: a sentence-transformers ONNX export run on the GPU, pooled and normalised as its files say.

One plan serves every batch: the graph is compiled once with its ``batch_size`` and ``sequence_length`` dims
open, and each run binds them from the feeds without recompiling. Inputs are sorted by length and cut into
batches of at most `max_batch` rows, each right-padded to its own longest row (as sentence-transformers'
``encode`` does), so one long text does not make every row of a request pay for its length. The encoder's
hidden states come back to the host, where the directory's pooling and Normalize run (`pooling.py`).

Inputs longer than the model's limit are refused, not truncated (OpenAI's rule: a silently cut text gives a
vector of another text). `embed`/`encode` are thread-safe: one run at a time on the model's executor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.embeddings.directory import EmbeddingDirectory, read_embedding_directory
from onyxia.cli.embeddings.pooling import normalize, pool
from onyxia.core import InputError, ModelLoadError

if TYPE_CHECKING:
    from onyxia.runtime import Runtime

__all__ = ["EmbeddingInputError", "EmbeddingModel", "Embeddings"]

DEFAULT_MAX_BATCH = 32

# the graph input -> its value for right-padded `ids` and `mask`; an input not listed is an error at load
_FEEDS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "input_ids": lambda ids, mask: ids,
    "attention_mask": lambda ids, mask: mask,
    "token_type_ids": lambda ids, mask: np.zeros_like(ids),  # one segment
    "position_ids": lambda ids, mask: np.maximum(np.cumsum(mask, axis=1) - 1, 0),  # decoder-style exports
}
_HIDDEN_OUTPUTS = ("last_hidden_state", "token_embeddings")  # optimum's name, sentence-transformers' export's


class EmbeddingInputError(InputError):
    """Input the model cannot embed; `field` is the request field to blame (``input`` or ``dimensions``)."""

    def __init__(self, message: str, field: str = "input") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Embeddings:
    vectors: np.ndarray  # float32 [inputs, dimensions]
    token_counts: list[int]  # tokens per input, special tokens included (what usage.prompt_tokens adds up)


class EmbeddingModel:
    def __init__(
        self, directory: EmbeddingDirectory, runtime: Runtime | None = None, max_batch: int = DEFAULT_MAX_BATCH
    ):
        from tokenizers import Tokenizer

        from onyxia.cli.plan_cache import compile_cached
        from onyxia.runtime import Runtime

        self.directory, self.max_batch = directory, max_batch
        self._tokenizer = Tokenizer.from_file(str(directory.tokenizer))
        self._tokenizer.no_padding()  # hub tokenizer.json files often pad or truncate: batches are built here
        self._tokenizer.no_truncation()
        self._runtime = runtime or Runtime()
        plan = compile_cached(directory.onnx, {}, self._runtime)
        self._inputs = {plan.tensors[t].name: plan.tensors[t].dtype.numpy for t in plan.inputs}
        unknown = sorted(set(self._inputs) - set(_FEEDS))
        if unknown or "input_ids" not in self._inputs:
            raise ModelLoadError(
                f"{directory.onnx}: inputs {sorted(self._inputs)}; expected input_ids and any of "
                f"{', '.join(_FEEDS)} (unknown: {', '.join(unknown) or 'none'})"
            )
        names = {plan.tensors[t].name: plan.tensors[t] for t in plan.outputs}
        self._output = next((name for name in _HIDDEN_OUTPUTS if name in names), "")
        width = names[self._output].dims[-1] if self._output else None
        if not isinstance(width, int):
            raise ModelLoadError(
                f"{directory.onnx}: outputs {sorted(names)}; expected a hidden-state output "
                f"({' or '.join(_HIDDEN_OUTPUTS)}) of static width"
            )
        self.dimension = width * len(directory.pooling)
        self._executor = self._runtime.load_model(plan)
        self._lock = threading.Lock()
        self.hidden_states([[directory.pad_token_id] * 2] * 2)  # compiles the shaders: the first call is not slow

    @classmethod
    def from_pretrained(
        cls, root: str | Path, runtime: Runtime | None = None, max_batch: int = DEFAULT_MAX_BATCH
    ) -> EmbeddingModel:
        """Load (compile or take from the plan cache) a sentence-transformers directory with its ONNX export."""
        return cls(read_embedding_directory(root), runtime, max_batch)

    @property
    def name(self) -> str:
        return self.directory.root.name

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with the tokenizer's special tokens ([CLS] ... [SEP]), after the default prompt if any."""
        prompt = self.directory.prompt
        return [list(e.ids) for e in self._tokenizer.encode_batch([prompt + t for t in texts])]

    def embed(self, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        """float32 [len(texts), dimensions or `self.dimension`]."""
        return self.encode(list(texts), dimensions).vectors

    def encode(self, inputs: Sequence[str] | Sequence[Sequence[int]], dimensions: int | None = None) -> Embeddings:
        """Texts (tokenized here) or token-id lists (taken as they are, as the model's own tokens)."""
        if not inputs:
            raise EmbeddingInputError("no input to embed: give at least one text or token list")
        size = self._check_dimensions(dimensions)
        ids = self._ids(inputs)
        self._check_ids(ids)
        pooled = np.empty((len(ids), self.dimension), np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.max_batch):
            rows = order[start : start + self.max_batch]
            hidden, mask = self.hidden_states([ids[i] for i in rows])
            pooled[rows] = pool(self.directory.pooling, hidden, mask)
        if size is not None:
            pooled = pooled[:, :size]
        vectors = normalize(pooled) if self.directory.normalize else pooled
        return Embeddings(np.ascontiguousarray(vectors), [len(t) for t in ids])

    def hidden_states(self, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The encoder's hidden states [rows, longest, width] for one right-padded batch, and its mask."""
        longest = max(len(t) for t in ids)
        padded = np.full((len(ids), longest), self.directory.pad_token_id, np.int64)
        mask = np.zeros((len(ids), longest), np.int64)
        for row, tokens in enumerate(ids):
            padded[row, : len(tokens)], mask[row, : len(tokens)] = tokens, 1
        feeds = {name: _FEEDS[name](padded, mask).astype(dtype) for name, dtype in self._inputs.items()}
        with self._lock:
            hidden = self._executor.run(feeds, [self._output])[self._output]
        return np.asarray(hidden, np.float32), mask

    def _ids(self, inputs: Sequence[str] | Sequence[Sequence[int]]) -> list[list[int]]:
        texts = [i for i in inputs if isinstance(i, str)]
        if len(texts) == len(inputs):
            return self.tokenize(texts)
        if texts:
            raise EmbeddingInputError("input mixes texts and token lists; give one kind")
        return [[int(t) for t in tokens] for tokens in inputs]

    def _check_dimensions(self, dimensions: int | None) -> int | None:
        if dimensions is None:
            return None
        sizes = self.directory.matryoshka
        if sizes is None:
            raise EmbeddingInputError(
                f"model {self.name!r} does not support 'dimensions' (its config.json has no "
                "matryoshka_dimensions or is_matryoshka)",
                "dimensions",
            )
        allowed = sizes or range(1, self.dimension + 1)
        if dimensions not in allowed or dimensions > self.dimension:
            expected = f"one of {list(sizes)}" if sizes else f"1 to {self.dimension}"
            raise EmbeddingInputError(
                f"dimensions {dimensions} is not supported by {self.name!r}; expected {expected}", "dimensions"
            )
        return dimensions

    def _check_ids(self, ids: list[list[int]]) -> None:
        limit, vocab = self.directory.max_tokens, self.directory.vocab_size or self._tokenizer.get_vocab_size()
        for index, tokens in enumerate(ids):
            if not tokens:
                raise EmbeddingInputError(f"input {index} has no tokens")
            if len(tokens) > limit:
                raise EmbeddingInputError(
                    f"input {index} has {len(tokens)} tokens; {self.name!r} takes at most "
                    f"{limit} ({self.directory.max_tokens_source})"
                )
            bad = next((t for t in tokens if not 0 <= t < vocab), None)
            if bad is not None:
                raise EmbeddingInputError(f"input {index}: token id {bad} is outside the vocabulary (0 to {vocab - 1})")
