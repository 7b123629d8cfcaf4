"""Study `diagnose`: values (analysis.py) → the report section. Sentences format values; they decide
nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tailscope.measure.intervals import QuantileInterval
from tailscope.report.blocks import Section, Table
from tailscope.store import Store
from tailscope.studies.common import interval_cell, study_section
from tailscope.studies.diagnose.analysis import FixResult, Phase, analyse
from tailscope.units import fmt_ns, fmt_ratio

INTRO = (
    "HotROD (Jaeger's example application: frontend, customer with a simulated MySQL, driver with a "
    "simulated Redis, route) at its defaults, driven open loop on /dispatch with a W3C traceparent per "
    "request; its traces fetched from a real Jaeger and diagnosed by `tailscope diagnose`, which knows "
    "nothing of HotROD. Each finding HotROD can express through a flag is then applied and measured."
)


def _cell(i: QuantileInterval) -> str:
    return f"{fmt_ns(i.estimate_ns)} {interval_cell(i, 0 < i.samples_beyond < 10)}"


def _phase_row(label: str, p: Phase | None) -> list[str]:
    if p is None or p.latency is None:
        return [label, "unavailable (no measurement stored)", "", "", "", ""]
    lat = p.latency
    return [label, f"{p.rate_per_s:g}/s", _cell(lat.p50), _cell(lat.p99), str(lat.samples), str(lat.errors)]


def _share(client: Mapping[str, Any], key: str) -> str:
    value = client.get(key)
    if value is None:
        return f"unavailable ({(client.get('unavailable') or {}).get(key, 'not computed')})"
    return f"{value:.1%}"


def _diagnosis_findings(doc: Mapping[str, Any]) -> list[str]:
    out = []
    for p in doc.get("populations", []):
        c = p.get("capacity") or {}
        if c.get("verdict") != "limit":
            continue
        name = (
            f"{p['parent_service']}:{p['parent_operation']} → {p['service']}:{p['operation']}"
            if p.get("kind") == "call_site"
            else f"{p['service']}:{p['operation']}"
        )
        out.append(
            f"{name}: capacity {c['servers']} ({c['confidence']} confidence, {c['spans']} spans); "
            f"inferred service p50 {fmt_ns(c['service_p50_ns'])}, wait p99 {fmt_ns(c['wait_p99_ns'])}"
        )
    for f in doc.get("bounded_fan_outs", []):
        out.append(
            f"{f['parent_service']}:{f['parent_operation']} → {f['service']}:{f['operation']}: fan-out bounded "
            f"at k = {f['k']} ({f['bounded']} of {f['instances']} instances; up to {f['calls_max']} calls)"
        )
    for c in doc.get("sequential_chains", []):
        out.append(
            f"{c['parent_service']}:{c['parent_operation']} → {c['service']}:{c['operation']}: sequential chain "
            f"of {c['calls_p50']:g} calls (chain {fmt_ns(c['chain_p50_ns'])}, longest call {fmt_ns(c['longest_p50_ns'])})"
        )
    client = doc.get("client") or {}
    if client:
        out.append(
            f"client join: {client.get('joined')} of {client.get('requests')} requests traced; the part of "
            f"client p99 no span covers: {_share(client, 'gap_p99_share_of_client_p99')}"
        )
    return out or ["no capacity, bounded fan-out or sequential chain found"]


def _fix_row(r: FixResult) -> list[str]:
    f = r.fix
    measured = r.measured.latency if r.measured else None
    if measured is None:
        return [f["id"], f["sentence"], f"unavailable ({r.unavailable})", "", "", "", ""]
    why = r.prediction.unavailable
    return [
        f["id"],
        f["sentence"],
        _cell(measured.p50),
        _cell(measured.p99),
        fmt_ratio(r.p99_ratio_to_baseline),
        f"unavailable ({why})" if r.predicted_over_measured_p50 is None else fmt_ratio(r.predicted_over_measured_p50),
        f"unavailable ({why})" if r.predicted_over_measured_p99 is None else fmt_ratio(r.predicted_over_measured_p99),
    ]


def build_section(study: Any, store: Store, run_id: str) -> Section:
    sec = study_section(study, store, run_id, INTRO)
    v = analyse(store.documents(run_id, study.name))
    if v.skipped:
        sec.notes.append(f"Not measured: {v.skipped}.")
        return sec
    sec.blocks.append(
        Table(
            "HotROD at its defaults (client latency from the intended send time)",
            ["phase", "rate", "p50 [95 %]", "p99 [95 %]", "requests", "errors"],
            [_phase_row(p.point, p) for p in v.baselines],
            f"tailscope-load open loop over customers 123, 392, 731, 567; {v.plan.get('window_s'):g} s windows "
            f"({v.plan.get('top_rate_window_s', 0):.0f} s at the highest rate, {v.plan.get('fix_window_s', 0):g} s per fix); "
            f"generator on CPUs {v.plan.get('load_cpus')}, Jaeger and HotROD on {v.plan.get('server_cpus')}.",
            findings=[
                line for point, doc in sorted(v.diagnoses.items()) for line in [point, *_diagnosis_findings(doc)]
            ],
        )
    )
    rows = [_fix_row(r) for r in v.fixes]
    sec.blocks.append(
        Table(
            f"Each fix the diagnosis licensed, measured at {v.plan.get('diagnosed_at_per_s')} requests/s",
            ["flag", "what the finding says to do", "p50 [95 %]", "p99 [95 %]", "p99 ÷ baseline",
             "predicted ÷ measured p50", "predicted ÷ measured p99"],
            rows or [["—", "no finding HotROD can express through a flag", "", "", "", "", ""]],
            "The twin's prediction per fix comes from its what-ifs once they are wired; until then it is "
            "unavailable, never estimated.",
            numeric_from=2,
            wrap_columns=(1,),
            details=[(n["finding"], n["reason"]) for n in v.not_applied],
            details_title="Findings HotROD cannot express through a flag",
        )
    )  # fmt: skip
    return sec
