"""What `read_embedding_directory` reads from a sentence-transformers directory, and how it refuses the rest.

Each case edits a copy of the fixture the way another exporter or an older sentence-transformers writes it
(the pre-5.0 pooling flags, onnx/model.onnx, a Dense module) and checks the reading or the error: the file
named, what it found, what was expected. No GPU: nothing is compiled.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from embedding_cases import CLS, DATA, MEAN

from onyxia.cli.embeddings import read_embedding_directory
from onyxia.core import ModelLoadError


@pytest.fixture
def copy(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(DATA / name, target)
        return target

    return make


def _edit(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def test_the_fixtures_read_as_sentence_transformers_saved_them() -> None:
    mean, cls = read_embedding_directory(DATA / MEAN), read_embedding_directory(DATA / CLS)
    assert (mean.pooling, mean.normalize, mean.matryoshka) == (("mean",), True, (8, 16))
    assert (cls.pooling, cls.normalize, cls.matryoshka) == (("cls",), False, None)
    assert mean.max_tokens == 64 and mean.onnx.name == "model.onnx" and mean.prompt == ""


def test_pre_5_pooling_flags_read_in_sentence_transformers_order(copy: Callable[[str], Path]) -> None:
    root = copy(MEAN)
    legacy = {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(legacy))
    assert read_embedding_directory(root).pooling == ("cls", "mean")


def test_hub_layout_and_its_limits(copy: Callable[[str], Path]) -> None:
    root = copy(CLS)
    (root / "onnx").mkdir()
    (root / "model.onnx").rename(root / "onnx" / "model.onnx")
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 40, "do_lower_case": False}))
    _edit(root / "config.json", lambda c: {**c, "is_matryoshka": True})
    _edit(
        root / "config_sentence_transformers.json",
        lambda c: {**c, "default_prompt_name": "query", "prompts": {"query": "q: "}},
    )
    found = read_embedding_directory(root)
    assert found.onnx == root / "onnx" / "model.onnx"
    assert (found.max_tokens, found.max_tokens_source) == (40, "max_seq_length in sentence_bert_config.json")
    assert found.matryoshka == () and found.prompt == "q: "


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: (r / "modules.json").unlink(), r"modules.json: missing"),
        (
            lambda r: _edit(
                r / "modules.json",
                lambda m: [*m, {"idx": 3, "path": "3_Dense", "type": "sentence_transformers.models.Dense"}],
            ),
            r"modules.json: module 3 \('sentence_transformers.models.Dense'\) is not supported",
        ),
        (
            lambda r: _edit(r / "modules.json", lambda m: [m[0], m[2], m[1]]),
            r"modules.json: modules \['encoder', 'normalize', 'pooling'\]; expected Transformer, Pooling",
        ),
        (lambda r: (r / "1_Pooling" / "config.json").unlink(), r"1_Pooling/config.json: missing"),
        (
            lambda r: _edit(r / "1_Pooling" / "config.json", lambda c: {**c, "pooling_mode": "median"}),
            r"1_Pooling/config.json: pooling mode 'median' is not supported; expected one of cls, max, mean",
        ),
        (
            lambda r: _edit(r / "1_Pooling" / "config.json", lambda c: {"embedding_dimension": 32}),
            r"1_Pooling/config.json: no pooling mode",
        ),
        (lambda r: (r / "model.onnx").unlink(), r"no ONNX graph \(model.onnx or onnx/model.onnx\)"),
        (lambda r: (r / "tokenizer.json").unlink(), r"tokenizer.json: missing"),
        (
            lambda r: _edit(r / "config.json", lambda c: {**c, "matryoshka_dimensions": "all"}),
            r"config.json: matryoshka_dimensions must be a list of positive integers",
        ),
        (
            lambda r: _edit(r / "config_sentence_transformers.json", lambda c: {**c, "default_prompt_name": "x"}),
            r"config_sentence_transformers.json: default_prompt_name 'x' is not one of its prompts",
        ),
    ],
)
def test_a_directory_onyxia_cannot_follow_is_refused_naming_the_file(
    copy: Callable[[str], Path], edit: Callable[[Path], None], message: str
) -> None:
    root = copy(MEAN)
    edit(root)
    with pytest.raises(ModelLoadError, match=message):
        read_embedding_directory(root)
