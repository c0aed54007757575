"""The warm-up phase: the shapes the mixed load can produce, each run once before the RSS baseline.

A server's memory grows to a plateau as it first meets each shape: allocator pools and arenas reach the
size of the largest transient arrays (logits rows read back for host sampling, a whole prefill chunk),
the executor's per-dims tables fill (one entry per set of changed dims), the tokenizer's word cache
fills, and the driver's allocations reach their high-water mark. None of that is a leak: it is bounded
by the shapes, not by the number of requests. Measuring drift from a sample taken at some request of the
mixed load would count whichever shapes had not come up yet as growth (a late baseline would hide a
leak instead), so the baseline is taken after this phase, by construction:

1. every spec of the pool once, in waves of `slots` sent at once: every prompt length the mix uses,
   prefilled beside other requests, streamed and whole, greedy, seeded and host-sampled;
2. for k = 1 .. slots, k requests at once, the largest specs (longest prompt plus answer) first: every
   decode batch size, with the longest sequences in every slot.

Warm-up answers are judged as the mixed ones are (each must equal its answer alone); the baseline is
read once the server is idle again, as the final sample is.
"""

from __future__ import annotations

import asyncio
import time
from itertools import zip_longest

from .mix import DISCONNECTS, KINDS, Planned, Spec
from .runner import Run, client_for, idle, one_request
from .server import gauges, rss_kib

__all__ = ["sequence_size", "server_slots", "warmup_phase", "warmup_waves"]


def sequence_size(spec: Spec) -> int:
    """Roughly the tokens a spec's sequence reaches: its prompt (about 6 characters a token) and answer."""
    body = spec.body
    prompt = sum(len(m["content"]) for m in body["messages"]) if "messages" in body else len(body["prompt"])
    return prompt // 6 + int(body["max_tokens"])


def server_slots(url: str, fallback: int) -> int:
    """The server's slots from /metrics (`onyxia_slots`), else `fallback` (a server without the gauge)."""
    found, _ = gauges(url)
    return int(found.get("onyxia_slots", 0)) or fallback


def warmup_waves(specs: list[Spec], slots: int) -> list[list[Planned]]:
    """The requests of the warm-up, in waves sent at once: every spec (`slots` a wave), k = 1 .. slots of the
    largest, then `slots` of each kind of the mix at once (bad requests included: a too-long prompt's
    tokens are the largest transient arrays a request makes). Alternate requests are streamed and alternate
    specs, so both endpoints and both response paths warm up."""
    by_size = sorted(specs, key=sequence_size, reverse=True)
    first = [s for s in by_size if s.endpoint == by_size[0].endpoint]  # the largest spec's endpoint leads
    other = [s for s in by_size if s.endpoint != by_size[0].endpoint]
    largest = [s for pair in zip_longest(first, other) for s in pair if s is not None]  # endpoints alternate
    waves = [
        [Planned(-1, "answer", spec, stream=i % 2 == 1) for i, spec in enumerate(specs[start : start + slots])]
        for start in range(0, len(specs), slots)
    ]
    waves += [
        [Planned(-1, "answer", largest[i % len(largest)], stream=i % 2 == 0) for i in range(k)]
        for k in range(1, slots + 1)
    ]
    for kind in KINDS:
        waves.append([_planned(kind, largest[i % len(largest)], i) for i in range(slots)])
    return waves


def _planned(kind: str, spec: Spec, i: int) -> Planned:
    """Request i of a wave of `kind`, drawn as the mix draws them (`mix.make_plan`), deterministically."""
    stream = kind in ("stream", "cancel") or (kind != "answer" and i % 2 == 1)
    disconnect = DISCONNECTS[i % len(DISCONNECTS)] if kind == "disconnect" else ""
    return Planned(-1, kind, spec, stream, include_usage=stream, cancel_after=1 + i % 6, disconnect=disconnect)


async def warmup_phase(run: Run, specs: list[Spec], slots: int, settle: float) -> None:
    start = time.perf_counter()
    async with client_for(run, slots) as client:
        for wave in warmup_waves(specs, slots):
            run.warmup += await asyncio.gather(*(one_request(run, client, planned) for planned in wave))
    await idle(run, settle)
    run.rss_warm = rss_kib(run.pid)
    run.rss_samples.append((0, run.rss_warm))
    run.seconds["warm-up"] = time.perf_counter() - start
