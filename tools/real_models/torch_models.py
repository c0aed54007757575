"""The torch-built models: torchvision's classifiers and SSDlite, and a TTS-style duration upsampler.

Each builder returns a `TorchCase`: the module in eval mode with seeded random weights, the example
inputs and the exporter arguments. Widths are reduced (never the topology) so each file stays well
under 2 MB: a ResNet-18 at 1/8 width keeps every conv, BatchNorm, residual Add, MaxPool and the
global pool of the real one. torchvision builds SSDlite at width 1.0 only (its builder forwards
`**kwargs` to both the backbone and `SSD`), so `ssdlite` assembles it from torchvision's own parts
exactly as `ssdlite320_mobilenet_v3_large` does, with `width_mult` on the backbone and the extras.

Exporters: the classifiers go through `torch.onnx.export`'s default (dynamo) path with a dynamic
batch; SSDlite and the upsampler through the TorchScript path (`dynamo=False`), which is how
torchvision documents detection export (its `nms` symbolic is registered for that path only) and how
VITS/Piper-style TTS models are exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn

__all__ = ["TORCH_CASES", "TorchCase", "export_torch"]


@dataclass
class TorchCase:
    """One torch model and how it is exported; `inputs` are also the oracle's inputs."""

    module: nn.Module
    inputs: dict[str, torch.Tensor]
    output_names: list[str]
    dynamo: bool
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)  # input -> {axis: dim name}
    dynamic_outputs: dict[str, dict[int, str]] = field(default_factory=dict)
    opset: int = 17


def _resnet18(width: int = 8) -> nn.Module:
    """torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]) with stage widths width*(1, 2, 4, 8).

    `ResNet.__init__` hard-codes 64 input planes; its `_make_layer` is reused as is.
    """
    from torchvision.models.resnet import BasicBlock, ResNet

    model = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)
    model.inplanes = width
    model.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
    model.bn1 = nn.BatchNorm2d(width)
    model.layer1 = model._make_layer(BasicBlock, width, 2)
    model.layer2 = model._make_layer(BasicBlock, width * 2, 2, stride=2)
    model.layer3 = model._make_layer(BasicBlock, width * 4, 2, stride=2)
    model.layer4 = model._make_layer(BasicBlock, width * 8, 2, stride=2)
    model.fc = nn.Linear(width * 8, 10)
    return model


def _randomize_norms(model: nn.Module, gen: torch.Generator) -> None:
    """Fresh BatchNorms are identities (mean 0, var 1, weight 1, bias 0); give them real statistics
    so the folded Conv+BN weights are exercised as a trained model's would be."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def _ssdlite(width_mult: float = 0.25, size: int = 160, num_classes: int = 4) -> nn.Module:
    """`ssdlite320_mobilenet_v3_large` from torchvision's parts, narrowed, at `size`x`size`."""
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD
    from torchvision.models.detection.ssdlite import SSDLiteFeatureExtractorMobileNet, SSDLiteHead

    norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone = mobilenet_v3_large(norm_layer=norm_layer, reduced_tail=True, width_mult=width_mult).features
    stages = [0] + [i for i, b in enumerate(backbone) if getattr(b, "_is_cn", False)] + [len(backbone) - 1]
    extractor = SSDLiteFeatureExtractorMobileNet(backbone, stages[-2], norm_layer, width_mult=width_mult)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
    out_channels = det_utils.retrieve_out_channels(extractor, (size, size))
    head = SSDLiteHead(out_channels, anchors.num_anchors_per_location(), num_classes, norm_layer)
    return SSD(
        extractor,
        anchors,
        (size, size),
        num_classes,
        head=head,
        score_thresh=0.001,
        nms_thresh=0.55,
        detections_per_img=300,
        topk_candidates=300,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )


class _Detector(nn.Module):
    """SSD takes a list of images and returns a list of dicts; export one image, three tensors."""

    def __init__(self, ssd: nn.Module) -> None:
        super().__init__()
        self.ssd = ssd

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        det = self.ssd([image])[0]
        return det["boxes"], det["scores"], det["labels"]


class DurationUpsampler(nn.Module):
    """A FastSpeech/VITS-style length regulator: token encoder, duration predictor, then frames.

    Durations are `clamp(round(exp(log_d)), 1)`; the frame count is their sum, so the output length
    depends on values, not shapes: `arange(total)` becomes a Range over a computed limit, and the
    alignment mask `starts <= t < ends` (VITS' `generate_path`) is multiplied into the hidden states.
    """

    def __init__(self, vocab: int = 40, dim: int = 32, mels: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.Sequential(nn.Conv1d(dim, dim, 3, padding=1), nn.ReLU(), nn.Conv1d(dim, dim, 3, padding=1))
        self.duration = nn.Sequential(nn.Conv1d(dim, dim, 3, padding=1), nn.ReLU(), nn.Conv1d(dim, 1, 1))
        self.decoder = nn.Conv1d(dim, mels, 3, padding=1)
        with torch.no_grad():  # log-durations around log(3) with spread, as a trained predictor's: 1-8 frames
            self.duration[-1].weight.mul_(4.0)
            self.duration[-1].bias.fill_(1.0)

    def forward(self, tokens: torch.Tensor, length_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(self.embed(tokens).transpose(1, 2))  # [1, dim, T]
        log_d = self.duration(h).squeeze(1)  # [1, T]
        durations = torch.clamp(torch.round(torch.exp(log_d) * length_scale), min=1.0)
        ends = torch.cumsum(durations, dim=1)
        starts = ends - durations
        t = torch.arange(ends[0, -1].to(torch.int64), dtype=torch.float32)  # [frames]
        path = ((t[None, None, :] >= starts[:, :, None]) & (t[None, None, :] < ends[:, :, None])).float()
        frames = torch.bmm(h, path)  # [1, dim, frames]
        return self.decoder(frames), durations.to(torch.int64)


def _image(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=gen)


def _cases(gen: torch.Generator) -> dict[str, TorchCase]:
    from torchvision.models import mobilenet_v3_small

    batch = {0: "batch"}
    resnet = _resnet18()
    mobilenet = mobilenet_v3_small(width_mult=0.35, num_classes=10)
    ssd = _ssdlite()
    for m in (resnet, mobilenet, ssd):
        _randomize_norms(m, gen)
    tokens = torch.randint(1, 40, (1, 12), generator=gen)
    return {
        "resnet18": TorchCase(
            resnet, {"pixel_values": _image(gen, 2, 3, 64, 64)}, ["logits"], True, {"pixel_values": batch}
        ),
        "mobilenet_v3_small": TorchCase(
            mobilenet, {"pixel_values": _image(gen, 2, 3, 96, 96)}, ["logits"], True, {"pixel_values": batch}
        ),
        "ssdlite_mobilenet_v3": TorchCase(
            _Detector(ssd),
            {"image": _image(gen, 3, 120, 160)},
            ["boxes", "scores", "labels"],
            False,
            {"image": {1: "height", 2: "width"}},
            {"boxes": {0: "detections"}, "scores": {0: "detections"}, "labels": {0: "detections"}},
            opset=11,
        ),
        "duration_upsampler": TorchCase(
            DurationUpsampler(),
            {"tokens": tokens, "length_scale": torch.tensor(1.5)},
            ["mel", "durations"],
            False,
            {"tokens": {1: "text_length"}},
            {"mel": {2: "frames"}, "durations": {1: "text_length"}},
        ),
    }


def torch_cases(seed: int) -> dict[str, TorchCase]:
    """All torch cases, weights and inputs drawn from one seeded generator (module init included)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cases = _cases(gen)
    for case in cases.values():
        case.module.eval()
    return cases


TORCH_CASES = ("resnet18", "mobilenet_v3_small", "ssdlite_mobilenet_v3", "duration_upsampler")


def export_torch(case: TorchCase, path: Any) -> None:
    """`torch.onnx.export` as the model's users call it; weights inline (the files are small)."""
    args = tuple(case.inputs.values())
    names = list(case.inputs)
    with torch.no_grad():
        if case.dynamo:
            # positional, since dynamo keys a dict by forward()'s parameter names
            shapes = tuple({a: torch.export.Dim(d) for a, d in case.dynamic.get(n, {}).items()} for n in names)
            program = torch.onnx.export(
                case.module,
                args,
                input_names=names,
                output_names=case.output_names,
                dynamic_shapes=shapes,
                dynamo=True,
                external_data=False,
            )
            program.save(str(path), external_data=False)
        else:
            torch.onnx.export(
                case.module,
                args,
                str(path),
                input_names=names,
                output_names=case.output_names,
                dynamic_axes={**case.dynamic, **case.dynamic_outputs},
                opset_version=case.opset,
                dynamo=False,
            )
