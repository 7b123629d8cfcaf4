"""Client latency joined to traces (tailscope.diagnose.client): hand-built request logs and traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.diagnose.client import MIN_JOINED_FOR_P99, RequestRow, join, read_request_log
from tailscope.diagnose.diagnosis import Diagnosis, client_lines, diagnose, document
from tailscope.traces.spans import Span, Trace, TraceSet


def root_trace(trace_id: int, duration_ns: int, hex_digits: int = 32) -> Trace:
    root = Span("a1", None, "front", "/api", "server", 1_000, 1_000 + duration_ns)
    return Trace(f"{trace_id:0{hex_digits}x}", root, 1_000, duration_ns, {}, 1, 0, 0)


def rows(latencies: list[int], first_id: int = 1, ok: bool = True) -> list[RequestRow]:
    return [RequestRow(first_id + i, 1_700_000_000_000_000_000 + i, lat, ok) for i, lat in enumerate(latencies)]


def test_the_gap_is_client_latency_minus_the_root_span_per_request():
    # 200 requests: the root span takes 1 ms, the client saw 1 ms + a gap of 0.1 ms, and in the slowest 1 %
    # (two requests) a gap of 9 ms (a queue before the first span).
    n = 200
    gaps = [100_000] * (n - 2) + [9_000_000, 9_000_000]
    log = rows([1_000_000 + g for g in gaps])
    traces = [root_trace(r.trace_id, 1_000_000) for r in log]
    c = join(log, traces)
    assert (c.requests, c.joined, c.untraced, c.traces_without_request, c.negative_gaps) == (n, n, 0, 0, 0)
    assert c.gap_p50_ns == pytest.approx(100_000)
    assert c.root_p50_ns == pytest.approx(1_000_000)
    assert c.gap_p50_share_of_client_p50 == pytest.approx(100_000 / 1_100_000)
    assert c.gap_p99_ns > 100_000  # the tail's gap shows at p99
    assert c.gap_p99_share_of_client_p99 == pytest.approx(c.gap_p99_ns / c.joined_client_p99_ns)
    assert c.tail_untraced_share == pytest.approx(9_000_000 / 10_000_000)
    assert c.unavailable == {}


def test_requests_without_a_trace_are_counted_with_the_reason_and_left_out_of_the_gap():
    log = rows([2_000_000] * 150)
    traces = [root_trace(r.trace_id, 1_500_000) for r in log[:120]]  # 30 not sampled
    traces.append(root_trace(10**30, 1_000_000))  # another client's trace
    c = join(log, traces, sampling=0.8)
    assert (c.joined, c.untraced, c.traces_without_request) == (120, 30, 1)
    assert "30 of 150 requests have no trace" in c.unavailable["untraced"]
    assert "sampling 0.8" in c.unavailable["untraced"]
    assert c.gap_p50_ns == pytest.approx(500_000)
    assert c.client_p50_ns == pytest.approx(2_000_000)


def test_trace_ids_match_whatever_their_leading_zeros():
    log = rows([3_000] * 3, first_id=5)
    c = join(log, [root_trace(r.trace_id, 1_000, hex_digits=16) for r in log])  # Jaeger trims to 16 digits
    assert c.joined == 3


def test_few_requests_give_a_p50_and_an_unavailable_p99_with_the_reason():
    log = rows([2_000] * 10)
    c = join(log, [root_trace(r.trace_id, 1_000) for r in log])
    assert c.gap_p50_ns == pytest.approx(1_000)
    assert c.gap_p99_ns is None and c.tail_untraced_share is None
    assert f"needs ≥ {MIN_JOINED_FOR_P99}" in c.unavailable["gap_p99_ns"]
    assert any("unavailable (only 10 requests" in line for line in client_lines(c))


def test_no_trace_at_all_is_null_with_a_reason_never_zero():
    log = rows([2_000] * 5)
    c = join(log, [root_trace(999, 1_000)])
    assert c.joined == 0 and c.gap_p50_ns is None and c.gap_p50_share_of_client_p50 is None
    assert "traceparent" in c.unavailable["gap_p50_ns"]
    assert "unavailable" in client_lines(c)[-1]


def test_root_spans_longer_than_the_client_latency_are_clamped_and_counted():
    log = rows([1_000, 5_000])
    c = join(log, [root_trace(log[0].trace_id, 3_000), root_trace(log[1].trace_id, 1_000)])
    assert c.negative_gaps == 1
    assert "clamped" in c.unavailable["negative_gaps"]


def test_non_ok_answers_are_left_out():
    log = rows([1_000] * 3) + rows([50_000], first_id=100, ok=False)
    c = join(log, [root_trace(r.trace_id, 500) for r in log])
    assert (c.requests, c.not_ok, c.joined) == (3, 1, 3)
    assert c.client_p50_ns == pytest.approx(1_000)


def test_the_request_log_file_is_read_and_bad_lines_are_named(tmp_path: Path):
    good = tmp_path / "requests.csv"
    good.write_text(
        "# tailscope.request-log/1\ntrace_id,intended_unix_ns,latency_ns,ok\n"
        "00000000000000ab00000000000000cd,6000,70,0\n"
        "4bf92f3577b34da6a3ce929d0e0e4736,7000,50,1\n"
    )
    log = read_request_log(good)
    assert log == [
        RequestRow(0xAB << 64 | 0xCD, 6000, 70, False),
        RequestRow(0x4BF92F3577B34DA6A3CE929D0E0E4736, 7000, 50, True),
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text("# tailscope.request-log/1\ntrace_id,intended_unix_ns,latency_ns,ok\nxyz,1,2,1\n")
    with pytest.raises(ValueError, match="line 3"):
        read_request_log(bad)
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n")
    with pytest.raises(ValueError, match="not a request log"):
        read_request_log(other)


def test_the_diagnosis_document_carries_the_join_or_null():
    log = rows([2_000] * 40)
    traces = [root_trace(r.trace_id, 1_000) for r in log]
    ts = TraceSet(traces, [], {}, len(traces))
    with_log: Diagnosis = diagnose(ts, requests=log)
    assert document(with_log, [])["client"]["joined"] == 40
    assert document(diagnose(ts), [])["client"] is None
