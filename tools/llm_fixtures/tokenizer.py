"""Train a tiny BPE tokenizer in a family's style and save it with the family's special tokens and template.

Why train one: the fixtures must exercise the real tokenizer pipelines Onyxia meets (Llama 3 / Qwen
byte-level BPE with a split regex, SentencePiece-style BPE with ``▁`` and byte fallback) with the real
special-token strings and ids near the vocabulary's ends, while staying tiny (vocab 1024) so the
embedding and lm head stay small. The corpus is the PSF license text (``corpus.txt``) plus the prompts
and the chat template's text, so every prompt tokenizes into real merges.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from .families import Family

__all__ = ["train_tokenizer", "save_tokenizer", "template_text"]

_HERE = Path(__file__).parent
_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|DIGITS| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)


def template_text(family: Family) -> str:
    """The family's chat template (a copy of the real model's ``chat_template``)."""
    return (_HERE / "templates" / f"{family.name}.jinja").read_text()


def _corpus(family: Family) -> list[str]:
    """Training lines: the license text and the templates' words, without special-token strings."""
    specials = [t for t, _ in family.head_tokens + family.tail_tokens]
    extra = ["system user assistant model Cutting Knowledge Date Today", "You are a helpful assistant."]
    lines = (_HERE / "corpus.txt").read_text().splitlines() + extra * 4
    out = []
    for line in lines:
        for s in specials:
            line = line.replace(s, " ")
        out.append(line + "\n")
    return out


def _added(tok: Tokenizer, tokens: list[tuple[str, bool]]) -> None:
    """Add tokens one at a time so their ids follow the table's order."""
    for content, special in tokens:
        added = AddedToken(content, special=special, normalized=False)
        if special:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])


def _post_processor(family: Family, tok: Tokenizer) -> processors.PostProcessor | None:
    if family.bos is None:
        return None
    bos_id = tok.token_to_id(family.bos)
    return processors.TemplateProcessing(
        single=f"{family.bos} $A",
        pair=f"{family.bos} $A {family.bos}:1 $B:1",
        special_tokens=[(family.bos, bos_id)],
    )


def _bytelevel(family: Family, size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if family.name.startswith("qwen"):
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_REGEX.replace("DIGITS", family.digits_split)), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_corpus(family), trainer)
    _check_size(family, tok.get_vocab_size(), size)
    _added(tok, family.tail_tokens)
    post = _post_processor(family, tok)
    level = processors.ByteLevel(trim_offsets=False)
    tok.post_processor = level if post is None else processors.Sequence([level, post])
    return tok


def _sentencepiece(family: Family, size: int) -> Tokenizer:
    """BPE over ``▁``-joined text with 256 byte-fallback pieces after the head specials (Llama/Gemma layout)."""
    norm: list[normalizers.Normalizer] = [normalizers.Replace(" ", "▁")]
    if family.sp_prepend:
        norm.insert(0, normalizers.Prepend("▁"))
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.normalizer = normalizers.Sequence(norm)
    # Train with a split before each "▁" so merges stay within words, as SentencePiece's do.
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trained_size = size - len(family.head_tokens) - 256
    trainer = trainers.BpeTrainer(vocab_size=trained_size, show_progress=False)
    trainer_tok.train_from_iterator(_corpus(family), trainer)
    _check_size(family, trainer_tok.get_vocab_size(), trained_size)
    trained = json.loads(trainer_tok.to_str())["model"]
    vocab = {t: i for i, (t, _) in enumerate(family.head_tokens)}
    vocab.update({f"<0x{b:02X}>": len(family.head_tokens) + b for b in range(256)})
    base = len(vocab)
    for token, idx in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        vocab[token] = base + idx
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence(norm)
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if family.sp_prepend:
        steps.append(decoders.Strip(" ", 1, 0))
    tok.decoder = decoders.Sequence(steps)
    _added(tok, family.head_tokens + family.tail_tokens)
    post = _post_processor(family, tok)
    if post is not None:
        tok.post_processor = post
    return tok


def _check_size(family: Family, got: int, want: int) -> None:
    if got != want:
        raise RuntimeError(
            f"tokenizer training for {family.name}: learned {got} tokens, expected {want} "
            "(the corpus is too small for the vocabulary; add text to corpus.txt)"
        )


def train_tokenizer(family: Family) -> Tokenizer:
    """A tokenizer of exactly ``config['vocab_size']`` ids in the family's style."""
    total = family.config["vocab_size"]
    if family.style == "bytelevel":
        tok = _bytelevel(family, total - len(family.tail_tokens))
    elif family.style == "sentencepiece":
        tok = _sentencepiece(family, total - len(family.tail_tokens))
    else:
        raise ValueError(f"family {family.name}: tokenizer style {family.style!r}, expected bytelevel|sentencepiece")
    if tok.get_vocab_size() != total:
        raise RuntimeError(f"tokenizer for {family.name}: {tok.get_vocab_size()} ids, expected {total}")
    return tok


def save_tokenizer(family: Family, tok: Tokenizer, out: Path) -> None:
    """Save through transformers (tokenizer_config.json, special_tokens_map.json, chat_template.jinja).

    The config is then given the family's real ``tokenizer_class`` and ``add_bos_token`` so loaders
    that branch on them see what the real model ships.
    """
    from transformers import PreTrainedTokenizerFast

    unk = "<unk>" if tok.token_to_id("<unk>") is not None else None
    bos = family.bos or ("<s>" if tok.token_to_id("<s>") is not None else None)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=family.eos[0],
        unk_token=unk,
        pad_token=family.pad,
        model_max_length=family.config["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = template_text(family)
    fast.save_pretrained(str(out))
    (out / "chat_template.jinja").write_text(template_text(family))
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("chat_template", None)
    cfg.update(
        tokenizer_class=family.tokenizer_class,
        add_bos_token=family.bos is not None,
        add_eos_token=False,
        **family.extra_tokenizer_config,
    )
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
