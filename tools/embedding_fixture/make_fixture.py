"""Build Onyxia's tiny random-weight sentence-transformers embedding fixtures with the real tools.

    python -m venv /tmp/embed-venv && /tmp/embed-venv/bin/pip install -r tools/embedding_fixture/requirements.txt
    /tmp/embed-venv/bin/python tools/embedding_fixture/make_fixture.py packages/onyxia-cli/tests/data

Nothing comes from a hub: a WordPiece vocabulary is trained with `tokenizers` on the corpus below, a
BERT (MiniLM's shape, shrunk) gets seeded random weights, sentence-transformers saves it with its own
files (``modules.json``, ``1_Pooling/config.json``, ``config_sentence_transformers.json``,
``sentence_bert_config.json``), and optimum exports the `feature-extraction` graph (``model.onnx`` with
``last_hidden_state``), as `optimum-cli export onnx --task feature-extraction` and sentence-transformers'
ONNX backend do. The weights (``model.safetensors``) are then deleted: only the ONNX file is test data.

Expected outputs (``expected.npz``), all from onnxruntime's ``last_hidden_state`` of the exported model on
one right-padded batch of every text in ``texts.json`` (2 to about 50 tokens, all within ``max_seq_length``), pooled by
sentence-transformers' own modules:

- ``embeddings``: the directory's modules in order (its Pooling, then Normalize where modules.json lists it);
- ``pool_<mode>``: `Pooling(mode)` alone, for every mode sentence-transformers has, so each pooling is
  checked against its reference on the same hidden states;
- ``dims_<d>`` (Matryoshka fixture only): the pooled embedding cut to its first d values, then normalised
  (vLLM's and OpenAI's ``dimensions``: unit vectors of the asked size).

As a check of the exporter itself, sentence-transformers' PyTorch ``encode`` must agree with ``embeddings``
(cosine > 0.9999), or the script fails.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime
import torch
from optimum.exporters.onnx import main_export
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertModel, BertTokenizerFast

__all__ = ["FIXTURES", "Fixture", "main"]

SEED = 1234
MAX_SEQ_LENGTH = 64  # = max_position_embeddings; every text fits (Onyxia refuses longer inputs)

CORPUS = """\
Onyxia compiles ONNX models into WGSL compute shaders and runs them on any WebGPU adapter.
A retrieval pipeline embeds every document once and each question at query time.
The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.
Sentence embeddings map text of any length to one vector; similar meanings land close together.
Mean pooling averages the token vectors under the attention mask; CLS pooling keeps the first one.
Rain fell on the harbour all night, and by morning the boats had drifted against the pier.
Numbers like 42, 3.14 and 2026 are split into pieces the vocabulary knows.
Bonjour, ça va? Café, naïve, résumé: accents are stripped by BERT's normaliser.
"""

TEXTS = [
    "hello",
    "The quick brown fox jumps over the lazy dog.",
    "Sentence embeddings map text to vectors.",
    "Rain fell on the harbour all night, and by morning the boats had drifted against the pier; "
    "a retrieval pipeline embeds every document once and each question at query time.",
    "Café naïve résumé 42",
    "",
    "Mean pooling averages token vectors; CLS pooling keeps the first.",
    "Onyxia onyxia ONYXIA compiles shaders shaders shaders",
]

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")


@dataclass(frozen=True)
class Fixture:
    name: str
    pooling: str
    normalize: bool
    matryoshka: tuple[int, ...] = ()  # config.json's `matryoshka_dimensions` (vLLM's key): truncatable sizes
    shape: tuple[int, int, int, int] = (2, 32, 4, 64)  # layers, hidden, heads, intermediate


FIXTURES = (
    Fixture("minilm-mean-tiny", "mean", normalize=True, matryoshka=(8, 16)),
    Fixture("bert-cls-tiny", "cls", normalize=False),
)
# `--bench`: all-MiniLM-L6-v2's encoder shape (6 layers, 384 wide, 12 heads) for tools/embedding_fixture/bench.py;
# too big for the repository: 43 MB (its vocabulary is this script's 186 pieces, not 30,522, so about half of MiniLM)
BENCH = Fixture("minilm-l6-shape", "mean", normalize=True, shape=(6, 384, 12, 1536))


def _tokenizer() -> BertTokenizerFast:
    """A BERT-style uncased WordPiece tokenizer whose vocabulary is every word of CORPUS plus every character
    (alone and as a ``##`` continuation), sorted: deterministic (`WordPieceTrainer` breaks ties differently
    from run to run), and words outside CORPUS still split into known pieces."""
    normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = {
        w for line in CORPUS.splitlines() for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line))
    }
    chars = {c for w in words for c in w} | set("abcdefghijklmnopqrstuvwxyz0123456789")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = specials + sorted(words | chars | {f"##{c}" for c in chars})
    tok = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(pieces)}, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    cls, sep = pieces.index("[CLS]"), pieces.index("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tok.decoder = decoders.WordPiece()
    return BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=MAX_SEQ_LENGTH,
    )


def _checkpoint(work: Path, fixture: Fixture) -> Path:
    """A seeded random BERT (MiniLM-L6's layout, shrunk by default: 2 layers, hidden 32, 4 heads) saved with its
    tokenizer."""
    tokenizer = _tokenizer()
    extra = {"matryoshka_dimensions": list(fixture.matryoshka)} if fixture.matryoshka else {}
    config = BertConfig(
        vocab_size=len(tokenizer),
        num_hidden_layers=fixture.shape[0],
        hidden_size=fixture.shape[1],
        num_attention_heads=fixture.shape[2],
        intermediate_size=fixture.shape[3],
        max_position_embeddings=MAX_SEQ_LENGTH,
        initializer_range=0.2,  # wider than 0.02 so attention is not near uniform and tokens differ
        **extra,
    )
    torch.manual_seed(SEED)
    model = BertModel(config, add_pooling_layer=False).eval()
    path = work / "hf"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _save_sentence_transformer(checkpoint: Path, fixture: Fixture, out: Path) -> SentenceTransformer:
    transformer = Transformer(str(checkpoint), max_seq_length=MAX_SEQ_LENGTH)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=fixture.pooling)]
    if fixture.normalize:
        modules.append(Normalize())
    model = SentenceTransformer(modules=modules, device="cpu")
    model.save(str(out))
    return model


def _export(out: Path, work: Path) -> None:
    """optimum's `feature-extraction` export of the saved directory, its model.onnx moved beside the ST files."""
    exported = work / "onnx"
    main_export(str(out), exported, task="feature-extraction", library_name="transformers", opset=17)
    shutil.copy(exported / "model.onnx", out / "model.onnx")
    for leftover in ("model.safetensors", "pytorch_model.bin"):
        (out / leftover).unlink(missing_ok=True)


def _hidden_states(out: Path, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's last_hidden_state for `texts` as one right-padded batch, and the attention mask."""
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    encodings = [tok.encode(t).ids for t in texts]
    longest = max(len(ids) for ids in encodings)
    pad = tok.token_to_id("[PAD]") or 0
    ids = np.array([e + [pad] * (longest - len(e)) for e in encodings], dtype=np.int64)
    mask = np.array([[1] * len(e) + [0] * (longest - len(e)) for e in encodings], dtype=np.int64)
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feeds = {i.name: feeds[i.name] for i in session.get_inputs()}
    (hidden,) = session.run(["last_hidden_state"], feeds)
    return hidden, mask


def _pool(mode: str, hidden: np.ndarray, mask: np.ndarray) -> torch.Tensor:
    features = {"token_embeddings": torch.from_numpy(hidden), "attention_mask": torch.from_numpy(mask)}
    pooled: torch.Tensor = Pooling(hidden.shape[-1], pooling_mode=mode)(features)["sentence_embedding"]
    return pooled


def _expected(model: SentenceTransformer, fixture: Fixture, hidden: np.ndarray, mask: np.ndarray) -> dict:
    features = {"token_embeddings": torch.from_numpy(hidden), "attention_mask": torch.from_numpy(mask)}
    for module in list(model)[1:]:  # the directory's own Pooling (and Normalize): sentence-transformers' code
        features = module(features)
    arrays = {"embeddings": features["sentence_embedding"].detach().numpy().astype(np.float32)}
    for mode in POOLING_MODES:
        arrays[f"pool_{mode}"] = _pool(mode, hidden, mask).detach().numpy().astype(np.float32)
    pooled = _pool(fixture.pooling, hidden, mask)
    for d in fixture.matryoshka:
        cut = torch.nn.functional.normalize(pooled[:, :d], p=2, dim=1)
        arrays[f"dims_{d}"] = cut.detach().numpy().astype(np.float32)
    return arrays


def _check_encode(model: SentenceTransformer, expected: np.ndarray) -> float:
    """sentence-transformers' PyTorch encode vs the ONNX-derived expectation: the export is faithful."""
    reference = model.encode(TEXTS, convert_to_numpy=True, batch_size=len(TEXTS))
    cos = np.sum(reference * expected, 1) / (np.linalg.norm(reference, axis=1) * np.linalg.norm(expected, axis=1))
    worst = float(cos.min())
    if worst < 0.9999:
        raise SystemExit(f"sentence-transformers' encode disagrees with the ONNX export: min cosine {worst}")
    return worst


def build(fixture: Fixture, root: Path) -> Path:
    out = root / fixture.name
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        checkpoint = _checkpoint(work, fixture)
        model = _save_sentence_transformer(checkpoint, fixture, out)
        _export(out, work)
    hidden, mask = _hidden_states(out, TEXTS)
    arrays = _expected(model, fixture, hidden, mask)
    worst = _check_encode(model, arrays["embeddings"])
    np.savez(out / "expected.npz", **arrays)
    tokens = [int(n) for n in mask.sum(1)]
    (out / "texts.json").write_text(json.dumps({"texts": TEXTS, "tokens": tokens}, indent=1, ensure_ascii=False))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 1e3:.0f} kB, tokens {tokens}, encode vs ONNX min cosine {worst:.7f}")
    return out


def main(argv: list[str]) -> int:
    bench = "--bench" in argv
    paths = [a for a in argv if a != "--bench"]
    if len(paths) != 1:
        print("usage: make_fixture.py [--bench] OUT_ROOT  (e.g. packages/onyxia-cli/tests/data)", file=sys.stderr)
        return 2
    for fixture in (BENCH,) if bench else FIXTURES:
        build(fixture, Path(paths[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
