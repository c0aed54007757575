"""The soak's phases: the reference answers alone, the warm-up (`warmup.py`), the mixed load, the quiet.

1. Reference: every distinct spec once, sequentially, non-streamed: the answer that request gets
   with nothing beside it.
2. Warm-up: every shape the mix can produce, once; the RSS baseline is read after it, server idle.
3. Mixed: `clients` tasks take the plan's requests in order; every completed answer is compared with
   its reference (text, finish_reason, and completion tokens where both carry usage). RSS is sampled
   at every tenth of the requests, for the report's trend (under load: transient arrays included).
4. Quiet: /metrics's in-flight gauges must come back to 0 (a cancelled or abandoned job that never
   ends is a leak), the first specs are asked again alone (the server still answers as at the
   start), and RSS is sampled again.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from dataclasses import dataclass, field

import httpx

from .client import Outcome, body_of, send
from .mix import BAD_KINDS, Planned, Spec
from .server import gauges, rss_kib

__all__ = [
    "AFTER_CHECKS",
    "Record",
    "Run",
    "client_for",
    "idle",
    "judge",
    "mixed_phase",
    "one_request",
    "quiet_phase",
    "reference_phase",
]

MAX_RETRIES = 200  # 429s retried per request; a valid request refused more often fails the soak
AFTER_CHECKS = 5
# Gauges that count work in flight; any other gauge (a capacity, a cache size) may stay non-zero.
IN_FLIGHT = re.compile(r"queue_depth|_active|_running|in_flight|inflight|_waiting|_pending|_queued")
EXPECTED_GAUGES = ("onyxia_queue_depth", "onyxia_slots_active")


@dataclass
class Record:
    planned: Planned
    outcome: Outcome
    verdict: str  # ok | mismatch | unchecked | fail: <why>
    retries: int = 0
    seconds: float = 0.0


@dataclass
class Run:
    """Everything the phases learn, for the report."""

    url: str
    model: str
    pid: int | None
    timeout: float
    too_long_tokens: int
    api_key: str = "soak"
    references: dict[Spec, Outcome] = field(default_factory=dict)
    warmup: list[Record] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    after: list[Record] = field(default_factory=list)
    rss_warm: int | None = None
    rss_end: int | None = None
    rss_samples: list[tuple[int, int | None]] = field(default_factory=list)  # (mixed requests done, KiB)
    leaks: list[str] = field(default_factory=list)
    gauge_notes: list[str] = field(default_factory=list)
    server_statuses: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def client_for(run: Run, clients: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {run.api_key}"}
    return httpx.AsyncClient(base_url=run.url, timeout=run.timeout, limits=limits, headers=headers)


def judge(planned: Planned, outcome: Outcome, reference: Outcome | None) -> str:
    """A bad request must be refused with a 4xx error body; an unknown model may be refused (4xx) or
    served (then as the reference); any completed answer must equal the reference exactly."""
    if outcome.problem:
        return f"fail: {outcome.problem}"
    if planned.kind == "disconnect":
        return "unchecked"
    status = outcome.status or 0
    if planned.kind in BAD_KINDS:
        return "ok" if 400 <= status < 500 else f"fail: a bad request ({planned.kind}) got {status}"
    if planned.kind == "unknown-model" and 400 <= status < 500 and status != 429:
        return "ok"
    if status != 200:
        return f"fail: status {status}"
    if outcome.cancelled:
        return "unchecked"
    if reference is None:
        return "fail: no reference answer"
    same = outcome.text == reference.text and outcome.finish_reason == reference.finish_reason
    tokens = outcome.completion_tokens
    return "ok" if same and (tokens is None or tokens == reference.completion_tokens) else "mismatch"


async def one_request(run: Run, client: httpx.AsyncClient, planned: Planned) -> Record:
    data, retries, start = body_of(planned, run.model, run.too_long_tokens), 0, time.perf_counter()
    while True:
        try:
            async with asyncio.timeout(run.timeout):
                outcome = await send(client, run.url, planned, data)
        except TimeoutError:
            outcome = Outcome(problem=f"hang: no complete answer within {run.timeout:.0f} s")
        if outcome.status != 429 or retries >= MAX_RETRIES:
            break
        retries += 1
        await asyncio.sleep(min(outcome.retry_after or 0.1, 0.5))
    verdict = judge(planned, outcome, run.references.get(planned.spec))
    return Record(planned, outcome, verdict, retries, time.perf_counter() - start)


async def reference_phase(run: Run, specs: list[Spec]) -> None:
    """Each spec alone; a spec the server cannot answer alone makes the whole soak meaningless."""
    start = time.perf_counter()
    async with client_for(run, 1) as client:
        for spec in specs:
            record = await one_request(run, client, Planned(-1, "answer", spec, stream=False))
            outcome = record.outcome
            if outcome.status != 200 or outcome.problem or outcome.text is None:
                hint = " (lower --long-words or raise the server's --max-length)" if outcome.status == 413 else ""
                raise RuntimeError(
                    f"reference: spec {spec.index} ({spec.family}, {spec.endpoint}) got status {outcome.status}"
                    f"{': ' + outcome.problem if outcome.problem else ''}{hint}\n  body: {spec.body_json[:300]}"
                )
            run.references[spec] = outcome
    run.seconds["reference"] = time.perf_counter() - start


async def mixed_phase(run: Run, plan: list[Planned], clients: int) -> None:
    pending, start = iter(plan), time.perf_counter()
    step = max(1, len(plan) // 10)

    async def worker(client: httpx.AsyncClient) -> None:
        for planned in pending:  # one shared iterator: each request is taken by exactly one client
            run.records.append(await one_request(run, client, planned))
            done = len(run.records)
            if done % step == 0 or done == len(plan):
                run.rss_samples.append((done, rss_kib(run.pid)))
                bad = sum(r.verdict != "ok" and r.verdict != "unchecked" for r in run.records)
                elapsed = time.perf_counter() - start
                print(f"soak: {done}/{len(plan)} requests, {bad} not ok, {elapsed:.1f} s", file=sys.stderr)

    async with client_for(run, clients) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    run.seconds["mixed"] = time.perf_counter() - start


async def idle(run: Run, settle: float) -> tuple[dict[str, float], dict[str, float]]:
    """Wait up to `settle` s for the in-flight gauges to reach 0 (abandoned jobs may still be running);
    returns (the gauges still busy, every gauge sample) and keeps the server's status counts."""
    start = time.perf_counter()
    while True:
        found, run.server_statuses = await asyncio.to_thread(gauges, run.url)
        busy = {name: value for name, value in found.items() if IN_FLIGHT.search(name) and value != 0}
        if not busy or time.perf_counter() - start > settle:
            return busy, found
        await asyncio.sleep(0.5)


async def quiet_phase(run: Run, specs: list[Spec], settle: float) -> None:
    start = time.perf_counter()
    busy, found = await idle(run, settle)
    run.leaks = [f"{name} = {value:g} after {settle:.0f} s quiet" for name, value in busy.items()]
    names = {name.split("{")[0] for name in found}
    checked = sorted(n for n in names if IN_FLIGHT.search(n))
    run.gauge_notes = [f"checked back to 0: {', '.join(checked) or 'none'}"]
    run.gauge_notes += [f"{n}: not exposed by this server, not checked" for n in EXPECTED_GAUGES if n not in names]
    async with client_for(run, 1) as client:
        health = (await client.get("/health")).json()
        if health.get("queue_depth", 0) != 0:
            run.leaks.append(f"/health queue_depth = {health['queue_depth']}")
        for spec in specs[:AFTER_CHECKS]:
            run.after.append(await one_request(run, client, Planned(-1, "answer", spec, stream=False)))
    run.rss_end = rss_kib(run.pid)
    run.seconds["quiet"] = time.perf_counter() - start
