"""Validation of engine result documents (the engine/driver contract)."""

from __future__ import annotations

import pytest

from conftest import needs_engine
from tailscope.lab.engines import EngineError, find_engine, validate_document


def test_valid_document_passes():
    doc = {"schema": "tailscope.result/1", "engine": "x", "machine": {}, "measurements": [], "unavailable": []}
    assert validate_document(doc, "x") is doc


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(schema="tailscope.result/99"), "unsupported schema"),
        (lambda d: d.pop("machine"), "machine"),
        (lambda d: d.update(measurements={}), "measurements"),
        (lambda d: d["measurements"].append({"name": "a"}), "latency"),
    ],
)
def test_invalid_documents_are_rejected_with_reason(mutate, message):
    doc = {"schema": "tailscope.result/1", "engine": "x", "machine": {}, "measurements": [], "unavailable": []}
    mutate(doc)
    with pytest.raises(EngineError, match=message):
        validate_document(doc, "x")


def _with_latency(latency: dict) -> dict:
    m = {"name": "a", "latency": {"count": 1000, "percentiles": {"50": 500, "99.9": 999}} | latency}
    return {"schema": "tailscope.result/1", "engine": "x", "machine": {}, "measurements": [m], "unavailable": []}


def test_percentile_intervals_are_accepted_and_checked():
    good = _with_latency(
        {
            "percentile_ci": {"50": [469, 532]},
            "percentile_ci_level": 0.95,
            "percentile_ci_unavailable": {"99.9": "fewer than 3688 samples"},
        }
    )
    assert validate_document(good, "x") is good
    assert validate_document(_with_latency({}), "x")  # a document from before intervals
    for bad, message in [
        ({"percentile_ci": {"50": [532, 469]}}, "lo > hi"),
        ({"percentile_ci": {"50": [469]}}, "not \\[lo, hi\\]"),
        ({"percentile_ci": {"50": ["a", "b"]}}, "not \\[lo, hi\\]"),
        ({"percentile_ci_unavailable": {"99.9": ""}}, "no reason"),
        ({"percentile_ci": {"50": [1, 2]}, "percentile_ci_unavailable": {"50": "why"}}, "both"),
        ({"percentile_ci": [1, 2]}, "must be objects"),
    ]:
        with pytest.raises(EngineError, match=message):
            validate_document(_with_latency(bad), "x")


def test_non_object_rejected():
    with pytest.raises(EngineError, match="not a JSON object"):
        validate_document([1, 2], "x")


def test_missing_engine_names_search_path(monkeypatch, tmp_path):
    monkeypatch.setenv("TAILSCOPE_ENGINE_DIR", str(tmp_path))
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(tmp_path / "nothing"))
    with pytest.raises(EngineError, match="not found"):
        find_engine("tailscope-no-such-engine")


@needs_engine("tailscope-svc")
def test_svc_lists_its_models_in_the_order_the_studies_use():
    """The one model list: every study, the CLI and advise read it from here."""
    from tailscope.lab.graph import svc_models

    assert list(svc_models()) == ["std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"]
    from tailscope.cli.common import DEPLOY_MODELS

    assert list(DEPLOY_MODELS) == list(svc_models())  # the deployment commands' fixed choices
