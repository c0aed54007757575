"""The summary: requests by kind, statuses, memory, time; and the list of reasons to fail.

Every reason is printed with what reproduces it: the request's kind and its body (the spec), so a
mismatch or a 5xx can be sent again by hand with curl against a fresh server.
"""

from __future__ import annotations

from collections import Counter

from .runner import Record, Run

__all__ = ["failures", "print_summary"]

_COLUMNS = ("sent", "ok", "unchecked", "mismatch", "failed", "429 retries")


def _row(records: list[Record]) -> tuple[int, ...]:
    verdicts = Counter(r.verdict if not r.verdict.startswith("fail") else "fail" for r in records)
    retries = sum(r.retries for r in records)
    return len(records), verdicts["ok"], verdicts["unchecked"], verdicts["mismatch"], verdicts["fail"], retries


def _table(run: Run) -> list[str]:
    groups: dict[str, list[Record]] = {}
    for record in sorted(run.records, key=lambda r: r.planned.label):
        groups.setdefault(record.planned.label, []).append(record)
    rows = [(label, _row(records)) for label, records in groups.items()]
    rows += [("all mixed", _row(run.records)), ("warm-up", _row(run.warmup)), ("after (alone again)", _row(run.after))]
    width = max(len(label) for label, _ in rows)
    lines = [f"{'kind':<{width}}  " + "  ".join(f"{c:>11}" for c in _COLUMNS)]
    lines += [f"{label:<{width}}  " + "  ".join(f"{v:>11}" for v in values) for label, values in rows]
    return lines


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def drift_percent(run: Run) -> float | None:
    if run.rss_warm is None or run.rss_end is None:
        return None
    return 100.0 * (run.rss_end - run.rss_warm) / run.rss_warm


def failures(run: Run, max_drift: float, stop_note: str) -> list[str]:
    found = []
    for record in [*run.warmup, *run.records, *run.after]:
        if record.verdict == "mismatch":
            reference = run.references[record.planned.spec]
            found.append(
                f"MISMATCH #{record.planned.number} {record.planned.label} stream={record.planned.stream}: "
                f"got {record.outcome.text!r} ({record.outcome.finish_reason}, {record.outcome.completion_tokens}), "
                f"alone {reference.text!r} ({reference.finish_reason}, {reference.completion_tokens})\n"
                f"    POST {record.planned.spec.endpoint} {record.planned.spec.body_json}"
            )
        elif record.verdict.startswith("fail"):
            found.append(
                f"FAILED #{record.planned.number} {record.planned.label} stream={record.planned.stream}: "
                f"{record.verdict[6:]}\n    POST {record.planned.spec.endpoint} {record.planned.spec.body_json}"
            )
    server_5xx = {s: n for s, n in run.server_statuses.items() if s.startswith("5") and n}
    if server_5xx:
        found.append(f"SERVER 5xx: /metrics onyxia_requests_total counts {server_5xx}")
    found += [f"LEAK: {leak}" for leak in run.leaks]
    drift = drift_percent(run)
    if drift is not None and drift > max_drift:
        found.append(f"RSS DRIFT: {drift:+.2f}% ({_mib(run.rss_warm)} -> {_mib(run.rss_end)}), limit {max_drift}%")
    if stop_note.startswith("HUNG"):
        found.append(f"SHUTDOWN: {stop_note}")
    return found


def print_summary(run: Run, max_drift: float, stop_note: str, wall: float) -> list[str]:
    """Print the summary; returns the failures (empty: the soak passed)."""
    found = failures(run, max_drift, stop_note)
    client_statuses = Counter(str(r.outcome.status or "none") for r in run.records)
    mismatches = sum(r.verdict == "mismatch" for r in [*run.warmup, *run.records, *run.after])
    drift = drift_percent(run)
    print(f"\nonyxia soak: {run.model} at {run.url}, {len(run.records)} mixed requests, {len(run.references)} specs")
    print("\n".join(_table(run)))
    print(f"statuses seen by clients: {dict(sorted(client_statuses.items()))} (none: disconnected, or no answer)")
    print(f"statuses counted by the server: {dict(sorted((k, int(v)) for k, v in run.server_statuses.items()))}")
    unknown = [r.outcome.status or 0 for r in run.records if r.planned.kind == "unknown-model"]
    served, refused = unknown.count(200), sum(400 <= status < 500 for status in unknown)
    print(f"unknown model: {served} served (answers compared), {refused} refused (4xx)")
    print(f"mismatches: {mismatches}")
    server_errors = sum((r.outcome.status or 0) >= 500 or r.outcome.error_type == "server_error" for r in run.records)
    print(f"5xx: {server_errors} (a 5xx status, or a server_error event inside a 200 stream)")
    print(f"leaks: {len(run.leaks)} ({'; '.join(run.gauge_notes)})")
    rss = "n/a (no server pid: pass --pid with --url)" if drift is None else f"{drift:+.2f}% (limit {max_drift}%)"
    print(f"RSS: after warm-up {_mib(run.rss_warm)}, end {_mib(run.rss_end)}, drift {rss} (both read idle)")
    trend = ", ".join(f"{done}: {_mib(kib)}" for done, kib in run.rss_samples[1:])
    print(f"RSS under load by mixed requests done: {trend or 'n/a'}")
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in run.seconds.items())
    print(f"time: {wall:.1f} s wall ({phases}); server {stop_note or 'not started by the soak'}")
    for failure in found[:20]:
        print(failure)
    if len(found) > 20:
        print(f"... and {len(found) - 20} more")
    print(f"verdict: {'PASS' if not found else f'FAIL ({len(found)} problems)'}")
    return found
