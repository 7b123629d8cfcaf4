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
