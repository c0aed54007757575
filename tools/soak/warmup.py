"""The warm-up phase: the shapes the mixed load can produce, each run once before the RSS baseline.

A server's memory grows to a plateau as it first meets each shape, and none of that is a leak: it is bounded
by the shapes, not by the number of requests. Measured in `onyxia serve` (docs/serving/index.md, "Tests and
soak"): the Python heap stays flat and the GPU objects fixed, the executor's table of changed-dims sets
fills, a too-long chat prompt (65,536 tokens to tokenize) raises RSS ~15 MiB the first time and never again,
and glibc keeps freed memory up to the largest transient arrays met so far. A baseline taken at some request
of the mixed load would count whichever shapes had not come up yet as growth (and a late one could hide a
leak), so the baseline is read after this phase, by construction:

1. every spec of the pool once, in waves of `width` sent at once (the mix's clients, at least `slots`:
   as many requests in flight as the mix will have, the queue included): every prompt length the mix uses,
   prefilled beside other requests, streamed and whole, greedy, seeded and host-sampled;
2. for k = 1 .. slots, k requests at once, the largest specs (longest prompt plus answer) first: every
   decode batch size, with the longest sequences in every slot;
3. `width` requests of each kind of the mix at once, the bad ones included, both endpoints.

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


def warmup_waves(specs: list[Spec], slots: int, width: int) -> list[list[Planned]]:
    """The requests of the warm-up, in waves sent at once: every spec (`width` a wave), k = 1 .. slots of the
    largest, then `width` of each kind of the mix at once (bad requests included: a too-long prompt's
    tokens are the largest transient arrays a request makes). Alternate requests are streamed and alternate
    specs, so both endpoints and both response paths warm up."""
    by_size = sorted(specs, key=sequence_size, reverse=True)
    first = [s for s in by_size if s.endpoint == by_size[0].endpoint]  # the largest spec's endpoint leads
    other = [s for s in by_size if s.endpoint != by_size[0].endpoint]
    largest = [s for pair in zip_longest(first, other) for s in pair if s is not None]  # endpoints alternate
    waves = [
        [Planned(-1, "answer", spec, stream=i % 2 == 1) for i, spec in enumerate(specs[start : start + width])]
        for start in range(0, len(specs), width)
    ]
    waves += [
        [Planned(-1, "answer", largest[i % len(largest)], stream=i % 2 == 0) for i in range(k)]
        for k in range(1, slots + 1)
    ]
    for kind in KINDS:
        waves.append([_planned(kind, largest[i % len(largest)], i) for i in range(width)])
    return waves


def _planned(kind: str, spec: Spec, i: int) -> Planned:
    """Request i of a wave of `kind`, drawn as the mix draws them (`mix.make_plan`), deterministically."""
    stream = kind in ("stream", "cancel") or (kind != "answer" and i % 2 == 1)
    disconnect = DISCONNECTS[i % len(DISCONNECTS)] if kind == "disconnect" else ""
    return Planned(-1, kind, spec, stream, include_usage=stream, cancel_after=1 + i % 6, disconnect=disconnect)


async def warmup_phase(run: Run, specs: list[Spec], slots: int, clients: int, settle: float) -> None:
    start, width = time.perf_counter(), max(slots, clients)
    async with client_for(run, width) as client:
        for wave in warmup_waves(specs, slots, width):
            run.warmup += await asyncio.gather(*(one_request(run, client, planned) for planned in wave))
    await idle(run, settle)
    run.rss_warm = rss_kib(run.pid)
    run.rss_samples.append((0, run.rss_warm))
    run.seconds["warm-up"] = time.perf_counter() - start
