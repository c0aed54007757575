"""Prometheus metrics, one registry per app (two apps in one process do not share counters).

Names follow Prometheus conventions (`_total` is added to counters by prometheus_client). The
prefill counter next to the prompt counter shows what KV reuse saved: their difference is the
prompt tokens served from the cache.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from onyxia.cli.serve.jobs import Finished

__all__ = ["Metrics"]

_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
_RATE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "onyxia_requests", "HTTP requests answered, by route and status", ["endpoint", "status"], registry=registry
        )
        self.prompt_tokens = Counter("onyxia_prompt_tokens", "Prompt tokens of finished generations", registry=registry)
        self.prefill_tokens = Counter(
            "onyxia_prefill_tokens", "Prompt tokens prefilled (the rest came from the KV cache)", registry=registry
        )
        self.completion_tokens = Counter("onyxia_completion_tokens", "Tokens generated", registry=registry)
        self.generations = Counter(
            "onyxia_generations", "Generations finished, by finish reason", ["finish_reason"], registry=registry
        )
        self.time_to_first_token = Histogram(
            "onyxia_time_to_first_token_seconds",
            "Seconds from admission (queue wait included) to the first token",
            buckets=_TTFT_BUCKETS,
            registry=registry,
        )
        self.decode_rate = Histogram(
            "onyxia_decode_tokens_per_second",
            "Decode speed of each generation",
            buckets=_RATE_BUCKETS,
            registry=registry,
        )
        self.queue_depth = Gauge(
            "onyxia_queue_depth", "Requests admitted and waiting for a free slot", registry=registry
        )
        self.slots_total = Gauge("onyxia_slots", "Sequences the server decodes at once (--parallel)", registry=registry)
        self.slots_active = Gauge("onyxia_slots_active", "Slots held by a request in progress", registry=registry)
        self.kv_slots_in_use = Gauge(
            "onyxia_kv_slots_in_use",
            "Slots whose KV cache holds tokens (requests in progress, or prefixes kept for the next request)",
            registry=registry,
        )
        self.batch_size = Histogram(
            "onyxia_batch_size",
            "Sequences advanced by each decode step",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )

    def observe(self, finished: Finished) -> None:
        self.prompt_tokens.inc(finished.prompt_tokens)
        self.prefill_tokens.inc(finished.prompt_tokens - finished.cached_tokens)
        self.completion_tokens.inc(finished.completion_tokens)
        self.generations.labels(finished.reason).inc()
        if finished.time_to_first_token is not None:
            self.time_to_first_token.observe(finished.time_to_first_token)
        if finished.decode_tokens_per_second > 0:
            self.decode_rate.observe(finished.decode_tokens_per_second)

    def render(self) -> bytes:
        return generate_latest(self.registry)
