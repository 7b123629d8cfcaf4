"""A twin's own-time waits read back as the handler's own time (twin/infer.py `_own_time_wait`): inferring
from a twin's own traces — what calibration does — must see the places the source's traces gave."""

from __future__ import annotations

import numpy as np

from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.twin.infer import InferOptions, fit_medians_us, infer

US = 1_000


def _traces(with_waits: bool, n: int = 400) -> TraceSet:
    """api:/get — 60 µs of own time, a call to backend (300 µs), 30 µs of own time. With `with_waits`
    each own time is a twin's own-time wait span (all but 2 µs of it), as the twin replays it."""
    rng = np.random.default_rng(3)
    traces = []
    t = 10_000 * US
    for i in range(n):
        own0, own1 = int(rng.normal(60, 3) * US), int(rng.normal(30, 2) * US)
        root = Span(f"r{i}", None, "api", "/get", "server", t, t + own0 + 300 * US + own1)
        if with_waits:
            for m, (a, d) in enumerate(((t + 1 * US, own0 - 2 * US), (t + own0 + 300 * US + 1 * US, own1 - 2 * US))):
                root.children.append(
                    Span(f"w{i}-{m}", root.span_id, "api", f"api.get.own_{m}_wait", "client", a, a + d)
                )
        client = Span(f"c{i}", root.span_id, "api", "fetch_client", "client", t + own0, t + own0 + 300 * US)
        server = Span(
            f"s{i}", client.span_id, "backend", "fetch_server", "server", t + own0 + 2 * US, t + own0 + 298 * US
        )
        client.server, server.is_server = server, True
        client.children.append(server)
        root.children.append(client)
        traces.append(Trace(f"t{i}", root, root.start_ns, root.end_ns - root.start_ns, {"api": 1}, 4, 1, 0))
        t += 2_000 * US
    return TraceSet(traces, [], {}, len(traces))


def test_a_twins_own_time_waits_are_read_back_as_own_time():
    opts = InferOptions(name="t", cpu_fraction=0.0, correlation=False)
    _, source = infer(_traces(False), opts)
    _, replay = infer(_traces(True), opts)
    src, rep = fit_medians_us(source), fit_medians_us(replay)
    own = [k for k in src if k.startswith("api.get.own_")]
    assert len(own) == 2
    # The same places, with the same medians: the waits are own time, not store stages.
    assert sorted(k for k in rep if k.startswith("api.get.")) == sorted(own)
    for k in own:
        assert abs(rep[k] - src[k]) < 2.0, (k, rep[k], src[k])
    # The twin inferred from its own traces has the source's stages: two own-time waits around the call.
    src_topo, _ = infer(_traces(False), opts)
    rep_topo, _ = infer(_traces(True), opts)

    def shape(topo: dict) -> list[str]:
        api = next(s for s in topo["services"] if s["name"] == "api")
        return [next(iter(st)) + ":" + (st.get("store") or {}).get("span", "") for st in api["endpoints"][0]["stages"]]

    assert shape(rep_topo) == shape(src_topo) == ["store:api.get.own_0_wait", "call:", "store:api.get.own_1_wait"]


def test_a_store_span_of_another_name_stays_a_store():
    """Only the twin's own-time wait names are read back: a real store span under the handler stays one."""
    ts = _traces(False)
    for i, t in enumerate(ts.traces):
        a = t.root.start_ns + 5 * US
        t.root.children.insert(0, Span(f"m{i}", t.root.span_id, "api", "redis_get_client", "client", a, a + 40 * US))
    _, report = infer(ts, InferOptions(name="t", cpu_fraction=0.0, correlation=False))
    assert "api.get.redis_get_client" in fit_medians_us(report)
