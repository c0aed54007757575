"""Realistic raw inputs, made here rather than downloaded: rendered text, speech-like audio, real files.

Each is deterministic (fixed seeds), so onnxruntime and Onyxia see the same bytes on every run and
every machine. The packages' own pre-processing turns them into model inputs (see `packaged_table.py`).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

SAMPLE_RATE = 16_000


def text_image(text: str, height: int = 48, size: int = 32, seed: int = 0) -> Image.Image:
    """Dark text on a slightly noisy light page, as a scanned line of print looks (RGB)."""
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    image = Image.new("RGB", (int(right - left) + 24, max(height, int(bottom - top) + 16)), (246, 244, 238))
    ImageDraw.Draw(image).text(
        (12 - left, (image.height - (bottom - top)) // 2 - top), text, fill=(20, 20, 28), font=font
    )
    noise = np.random.default_rng(seed).normal(0, 6, (image.height, image.width, 1))
    return Image.fromarray(np.clip(np.asarray(image, np.float64) + noise, 0, 255).astype(np.uint8))


def document_page(lines: list[str], width: int = 640, seed: int = 1) -> Image.Image:
    """A page of several printed lines with margins: what a text detector looks for."""
    rows = [text_image(line, size=28, seed=seed + i) for i, line in enumerate(lines)]
    page = Image.new("RGB", (width, 40 + sum(r.height + 16 for r in rows)), (246, 244, 238))
    y = 24
    for row in rows:
        page.paste(row.crop((0, 0, min(row.width, width - 48), row.height)), (32, y))
        y += row.height + 16
    return page


def captcha(text: str, seed: int = 2) -> Image.Image:
    """A short code over interference lines and dots, the captcha style ddddocr reads."""
    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=40)
    image = Image.new("RGB", (40 * len(text) + 40, 70), (230, 236, 242))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        xy = [int(v) for v in rng.integers(0, (image.width, image.height, image.width, image.height))]
        draw.line(xy, fill=tuple(int(c) for c in rng.integers(60, 200, 3)), width=2)
    for i, char in enumerate(text):
        color = tuple(int(c) for c in rng.integers(0, 120, 3))
        draw.text((20 + 40 * i, 8 + int(rng.integers(-4, 5))), char, fill=color, font=font)
    for x, y in rng.integers(0, (image.width, image.height), (200, 2)):
        draw.point((int(x), int(y)), fill=(90, 90, 90))
    return image


def scene(size: tuple[int, int] = (480, 360), seed: int = 3) -> np.ndarray:
    """A BGR photo-like scene: a gradient sky, shapes with edges, a sign with a word on it (uint8)."""
    rng = np.random.default_rng(seed)
    w, h = size
    sky = np.linspace(0, 1, h)[:, None, None] * np.array([-90.0, -40.0, 20.0]) + np.array([235.0, 200.0, 150.0])
    image = Image.fromarray(np.broadcast_to(sky, (h, w, 3)).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, int(h * 0.7), w, h), fill=(70, 120, 60))
    draw.ellipse((int(w * 0.1), int(h * 0.35), int(w * 0.35), int(h * 0.8)), fill=(40, 60, 170))
    draw.rectangle((int(w * 0.55), int(h * 0.3), int(w * 0.9), int(h * 0.55)), fill=(250, 250, 250), outline=(0, 0, 0))
    draw.text((int(w * 0.58), int(h * 0.34)), "STOP 42", fill=(10, 10, 10), font=ImageFont.load_default(size=36))
    noisy = np.asarray(image, np.float64) + rng.normal(0, 4, (h, w, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


_VOWELS = ((730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410))


def _resonate(x: np.ndarray, freq: float, bandwidth: float) -> np.ndarray:
    """A two-pole formant resonator (Klatt's), run sample by sample."""
    r = np.exp(-np.pi * bandwidth / SAMPLE_RATE)
    a1, a2 = 2 * r * np.cos(2 * np.pi * freq / SAMPLE_RATE), -r * r
    y = np.zeros_like(x)
    y1 = y2 = 0.0
    for i, v in enumerate(x):
        y1, y2 = (1 - a1 - a2) * v + a1 * y1 + a2 * y2, y1
        y[i] = y1
    return y


def speech_like(seconds: float, seed: int = 4) -> np.ndarray:
    """16 kHz mono float32, a formant synthesizer's babble: syllables of a fricative burst then a vowel
    (a glottal pulse train at a falling 120-180 Hz pitch through three formant resonators), at
    about four a second with a pause every few, over low room noise."""
    rng = np.random.default_rng(seed)
    pieces: list[np.ndarray] = []
    while sum(len(p) for p in pieces) < seconds * SAMPLE_RATE:
        consonant = rng.normal(0, 0.02, int(0.05 * SAMPLE_RATE))
        consonant = np.diff(consonant, prepend=0.0)  # high-passed noise, like /s/ or /t/
        n = int(rng.uniform(0.14, 0.24) * SAMPLE_RATE)
        f0 = np.linspace(rng.uniform(150, 180), rng.uniform(115, 140), n)
        pulses = np.diff(np.floor(np.cumsum(f0) / SAMPLE_RATE), prepend=0.0)
        vowel = pulses
        for formant, bandwidth in zip(_VOWELS[int(rng.integers(len(_VOWELS)))], (80, 100, 150), strict=True):
            vowel = _resonate(vowel, formant, bandwidth)
        vowel *= np.hanning(n) * 0.3 / max(float(np.abs(vowel).max()), 1e-9)
        pause = np.zeros(int(rng.choice([0.03, 0.03, 0.25]) * SAMPLE_RATE))
        pieces += [consonant, vowel, pause]
    signal = np.concatenate(pieces)[: int(seconds * SAMPLE_RATE)]
    return (signal + rng.normal(0, 0.002, len(signal))).astype(np.float32)


def melody(seconds: float, seed: int = 5) -> np.ndarray:
    """16 kHz mono float32: a plucked-string melody (decaying harmonics, A minor arpeggio), for pitch models."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    out = np.zeros(n)
    notes = [220.0, 261.63, 329.63, 440.0, 329.63, 261.63]
    step = n // len(notes)
    for i, f in enumerate(notes):
        t = np.arange(n - i * step) / SAMPLE_RATE
        tone = sum(np.sin(2 * np.pi * k * f * t) * 0.6**k for k in range(1, 6)) * np.exp(-3.0 * t)
        out[i * step :] += tone
    return (0.2 * out + rng.normal(0, 0.002, n)).astype(np.float32)
