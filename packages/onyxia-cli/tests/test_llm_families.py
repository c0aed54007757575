"""The family table: every fixture directory maps to its row; an unknown architecture whose graph does not
fit the conventions gets one error naming the architecture and the tested families."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from llm_cases import DATA, FAMILIES

from onyxia.cli.llm.families import describe_architecture, family_of
from onyxia.cli.llm.model_dir import resolve_model_dir
from onyxia.core import ModelLoadError


@pytest.mark.parametrize("family", ["gemma3", *FAMILIES])
@pytest.mark.parametrize("layout", ["optimum", "genai"])
def test_every_fixture_names_its_family(family: str, layout: str) -> None:
    root = DATA / f"{family}-tiny-{layout}"
    root = root / "fp32" if layout == "genai" else root
    found = family_of(resolve_model_dir(root).config)
    assert found is not None and found.name == family


def test_an_unknown_architecture_that_does_not_fit_names_itself(tmp_path: Path) -> None:
    from onyxia.cli.llm import LlmSession

    root = tmp_path / "falcon"
    shutil.copytree(DATA / "llama-tiny-optimum", root)
    config = (root / "config.json").read_text().replace("LlamaForCausalLM", "FalconForCausalLM")
    (root / "config.json").write_text(config.replace('"model_type": "llama"', '"model_type": "falcon"'))
    model = onnx.load(str(root / "model.onnx"))
    model.graph.output[0].name = "scores"  # not 'logits': outside the conventions
    for node in model.graph.node:
        node.output[:] = ["scores" if o == "logits" else o for o in node.output]
    onnx.save(model, str(root / "model.onnx"))
    assert "FalconForCausalLM, not a tested family" in describe_architecture(resolve_model_dir(root).config)
    with pytest.raises(ModelLoadError, match=r"FalconForCausalLM, not a tested family \(tested: gemma3, gemma2, llama"):
        LlmSession.from_pretrained(root)
