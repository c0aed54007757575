"""Real architectures, made by their real exporters, against onnxruntime on the same inputs.

tests/data/real_models/ holds what `tools/real_models` wrote (seeded random weights; see its README):
torchvision's ResNet-18 and MobileNetV3 (torch.onnx.export, dynamo) and SSDlite with its
post-processing (TorchScript exporter), ViT, BERT and a Whisper-tiny-shaped encoder-decoder
(optimum-cli), and a duration-predictor upsampler whose frame count depends on values. Each `.npz`
holds the inputs and onnxruntime 1.32's outputs. Every file runs: a file the generator adds must
join `PASSING` with the read-backs it needs per run (staging-buffer maps, the outputs' one included).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from real_model_suite import DATA, assert_matches, read_record, run_onyxia

# file -> readbacks per run (staging-buffer maps); a plan without data-dependent shapes reads back once
PASSING: dict[str, int] = {
    "resnet18": 1,
    "vit": 1,
    "bert": 1,
    "whisper_encoder": 1,
    "whisper_decoder": 1,
    "whisper_decoder_with_past": 1,
    "mobilenet_v3_small": 1,
    "duration_upsampler": 2,  # its frame count (a float Range limit, Cast of an integer) is read back mid-run
    "whisper_decoder_merged": 1,  # its If on the use_cache_branch input: a plan per value, only that branch
    # 3 NonZero counts and 3 TopK ks (min(300, count)) mid-run, the If's condition (are there boxes?),
    # the NonMaxSuppression count inside its else-branch, then the outputs
    "ssdlite_mobilenet_v3": 9,
}


def test_every_exported_file_is_in_one_table() -> None:
    manifest = json.loads((DATA / "manifest.json").read_text())
    names = {m["name"] for m in manifest["models"]}
    assert names == set(PASSING), "a file of tools/real_models is not in PASSING"


@pytest.mark.parametrize("name", list(PASSING))
def test_real_model_matches_onnxruntime(runtime: Any, name: str, record_property: Any) -> None:
    _, expected = read_record(name)
    measured = run_onyxia(runtime, name)
    worst = assert_matches(name, measured.outputs, expected)
    assert measured.readbacks_per_run == PASSING[name]
    for key in ("compile_s", "load_s", "first_run_s", "run_s", "readbacks_per_run", "bytes_per_run"):
        record_property(key, getattr(measured, key))
    record_property("worst_relative_error", worst)
