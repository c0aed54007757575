"""The float models the suite starts from, built in torch with seeded random weights and exported.

Each builder returns a `TorchCase` (module, example inputs, exporter arguments). They are the fp32
files of the suite and the inputs of `quantized.py` and `optimized.py`:

- `convnet`: a small image classifier in plain `torch.nn` (conv + folded BatchNorm + ReLU, a strided
  conv, a residual Add, a depthwise conv, global average pool, Linear): every op quantize_static and
  quantize_dynamic rewrite for CNNs (Conv, Add, GlobalAveragePool, Gemm), at 8-32 channels.
- `bert`: transformers `BertModel` shaped like MiniLM at a quarter width (hidden 64, 2 layers, 4 heads,
  intermediate 256, vocab 512), eager attention so the TorchScript graph is the one onnxruntime's optimizer
  pattern-matches; `vit`: `ViTModel`, 32x32 images, patch 8, hidden 48.
- `lstm_*` / `gru_*`: `nn.LSTM` / `nn.GRU` uni- and bidirectional, batch-first or not; the `_packed`
  ones run `pack_padded_sequence`, which the TorchScript exporter turns into the ONNX op's
  `sequence_lens` input.
- `stft_logmel`: a speech front end, `torch.stft` (Hann window, onesided) -> power -> a mel
  filterbank matmul -> log, exported at opset 17 where `torch.stft` becomes ONNX `STFT`.

All but one go through the TorchScript exporter (`dynamo=False`): it is the path onnxruntime's
quantization and transformer-optimizer tooling is written against, and the one that maps packed
sequences to `sequence_lens`. `stft_logmel_dynamo` is the same front end through torch 2.13's default
(dynamo) exporter at opset 18: it feeds STFT a `[batch, length, 1]` signal where the TorchScript one
feeds `[batch, length]`, and it declares value_info for its initializers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

__all__ = ["BERT_CONFIG", "TORCH_CASES", "VIT_CONFIG", "TorchCase", "build_case", "export_torch"]


@dataclass
class TorchCase:
    """One torch model and how it is exported; `inputs` are also the oracle's inputs."""

    module: nn.Module
    inputs: dict[str, torch.Tensor]
    output_names: list[str]
    source: str
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    opset: int = 17
    dynamo: bool = False

    @property
    def exporter(self) -> str:
        return f"torch.onnx.export ({'dynamo' if self.dynamo else 'TorchScript'}, opset {self.opset})"


class ConvNet(nn.Module):
    """Conv-BN-ReLU stem, a strided conv, a residual block, a depthwise conv, pool and classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 1))
        self.depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(self.stem(x))
        y = torch.relu(y + self.block(y))
        y = torch.relu(self.depthwise(y))
        return self.fc(torch.flatten(self.pool(y), 1))


class Recurrent(nn.Module):
    """An `nn.LSTM` / `nn.GRU` layer; with `packed`, padded batches go through pack_padded_sequence."""

    def __init__(self, cell: type[nn.Module], bidirectional: bool, batch_first: bool, packed: bool) -> None:
        super().__init__()
        self.rnn = cell(16, 24, batch_first=batch_first, bidirectional=bidirectional)
        self.batch_first, self.packed = batch_first, packed

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        if not self.packed or lengths is None:
            return self.rnn(x)[0]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=False)
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(
            out, batch_first=self.batch_first, total_length=x.shape[1 if self.batch_first else 0]
        )[0]


def _mel_filters(bins: int, mels: int, rate: int) -> torch.Tensor:
    """Triangular mel filters [bins, mels] (HTK mel scale), as librosa/torchaudio build them."""

    def mel(f: float) -> float:
        return 2595.0 * math.log10(1.0 + f / 700.0)

    edges = torch.linspace(mel(0.0), mel(rate / 2), mels + 2)
    hz = 700.0 * (10 ** (edges / 2595.0) - 1.0)
    freqs = torch.linspace(0, rate / 2, bins)
    lower = (freqs[:, None] - hz[None, :-2]) / (hz[1:-1] - hz[:-2])
    upper = (hz[None, 2:] - freqs[:, None]) / (hz[2:] - hz[1:-1])
    return torch.clamp(torch.minimum(lower, upper), min=0.0)


class StftLogMel(nn.Module):
    """Whisper-style features: |STFT|^2 of a Hann-windowed signal, mel filterbank, log10, clamp."""

    window: torch.Tensor
    filters: torch.Tensor

    def __init__(self, n_fft: int = 128, hop: int = 32, mels: int = 20) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", _mel_filters(n_fft // 2 + 1, mels, 8000))

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(audio, self.n_fft, self.hop, window=self.window, center=False, return_complex=False)
        power = spec[..., 0] ** 2 + spec[..., 1] ** 2  # [batch, bins, frames]
        mel = torch.matmul(power.transpose(1, 2), self.filters)
        return torch.log10(torch.clamp(mel, min=1e-10))


def _randomize_norms(model: nn.Module, gen: torch.Generator) -> None:
    """BatchNorm statistics and LayerNorm affine parameters away from identity, so a dropped or
    misfolded norm shows."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)) and m.weight is not None:
            m.weight.data.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
            m.bias.data.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))


def _convnet(gen: torch.Generator) -> TorchCase:
    model = ConvNet()
    return TorchCase(model, {"pixel_values": torch.randn(2, 3, 32, 32, generator=gen)}, ["logits"], "ConvNet")


def _hf(model_class: str, config_class: str, config: dict[str, object]) -> nn.Module:
    import transformers

    cfg = getattr(transformers, config_class)(**config, attn_implementation="eager")
    return getattr(transformers, model_class)(cfg, add_pooling_layer=False)


BERT_CONFIG: dict[str, object] = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=64,
    type_vocab_size=2,
)
VIT_CONFIG: dict[str, object] = dict(
    image_size=32,
    patch_size=8,
    num_channels=3,
    hidden_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=96,
)


def _bert(gen: torch.Generator) -> TorchCase:
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[-1, 8:] = 0  # a padded row, so the attention mask matters
    types = torch.zeros(2, 16, dtype=torch.int64)
    types[:, 8:] = 1
    inputs = {
        "input_ids": torch.randint(3, 512, (2, 16), generator=gen),
        "attention_mask": mask,
        "token_type_ids": types,
    }
    dyn = {k: {0: "batch", 1: "sequence"} for k in inputs}
    return TorchCase(
        _hf("BertModel", "BertConfig", BERT_CONFIG), inputs, ["last_hidden_state"], "transformers BertModel", dyn
    )


def _vit(gen: torch.Generator) -> TorchCase:
    inputs = {"pixel_values": torch.randn(2, 3, 32, 32, generator=gen)}
    return TorchCase(_hf("ViTModel", "ViTConfig", VIT_CONFIG), inputs, ["last_hidden_state"], "transformers ViTModel")


def _recurrent(
    cell: type[nn.Module], bidirectional: bool, batch_first: bool, packed: bool
) -> Callable[[torch.Generator], TorchCase]:
    def build(gen: torch.Generator) -> TorchCase:
        shape = (3, 10, 16) if batch_first else (10, 3, 16)
        inputs = {"x": torch.randn(*shape, generator=gen)}
        if packed:
            inputs["lengths"] = torch.tensor([10, 4, 7], dtype=torch.int64)
        model = Recurrent(cell, bidirectional, batch_first, packed)
        return TorchCase(model, inputs, ["y"], f"nn.{cell.__name__}")

    return build


def _stft(dynamo: bool) -> Callable[[torch.Generator], TorchCase]:
    def build(gen: torch.Generator) -> TorchCase:
        inputs = {"audio": torch.randn(2, 1024, generator=gen)}
        return TorchCase(
            StftLogMel(), inputs, ["log_mel"], "torch.stft + mel matmul", opset=18 if dynamo else 17, dynamo=dynamo
        )

    return build


TORCH_CASES: dict[str, Callable[[torch.Generator], TorchCase]] = {
    "convnet": _convnet,
    "bert": _bert,
    "vit": _vit,
    "lstm": _recurrent(nn.LSTM, False, False, False),
    "lstm_bidirectional_batch_first": _recurrent(nn.LSTM, True, True, False),
    "lstm_packed": _recurrent(nn.LSTM, False, True, True),
    "lstm_bidirectional_packed": _recurrent(nn.LSTM, True, False, True),
    "gru_batch_first": _recurrent(nn.GRU, False, True, False),
    "gru_bidirectional": _recurrent(nn.GRU, True, False, False),
    "gru_bidirectional_packed": _recurrent(nn.GRU, True, True, True),
    "stft_logmel": _stft(dynamo=False),
    "stft_logmel_dynamo": _stft(dynamo=True),
}


def build_case(name: str, seed: int) -> TorchCase:
    """The named case with weights drawn from `seed` (the same seed, the same weights and inputs)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    case = TORCH_CASES[name](gen)
    _randomize_norms(case.module, gen)
    case.module.eval()
    return case


def export_torch(case: TorchCase, path: Path) -> None:
    """`torch.onnx.export` on the case's path; weights inline (dynamo writes them to a side file)."""
    with torch.no_grad():
        torch.onnx.export(
            case.module,
            tuple(case.inputs.values()),
            str(path),
            input_names=list(case.inputs),
            output_names=case.output_names,
            dynamic_axes=case.dynamic or None,
            opset_version=case.opset,
            dynamo=case.dynamo,
        )
    if case.dynamo:  # fold the weights back in; drop per-node stack traces (source paths, line numbers)
        import onnx

        model = onnx.load(str(path))
        for node in model.graph.node:
            del node.metadata_props[:]
        onnx.save(model, str(path))
        Path(f"{path}.data").unlink(missing_ok=True)
