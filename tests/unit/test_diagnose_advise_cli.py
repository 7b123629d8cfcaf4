"""`tailscope diagnose --advise`'s options (python/tailscope/cli/diagnose.py): every number range-checked
with a message naming the option, the advice options refused without --advise, nothing read or run on
a usage error. No engine: each case ends before the traces are read."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tailscope.cli import main


@pytest.fixture
def traces(tmp_path):
    p = tmp_path / "traces.json"
    p.write_text('{"data": []}')
    return p


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--objective-ms", "0"),
        ("--objective-ms", "-5"),
        ("--objective-ms", "nan"),
        ("--objective-ms", "600001"),
        ("--duration-s", "0.5"),
        ("--duration-s", "inf"),
        ("--duration-s", "3601"),
        ("--faster-percent", "0"),
        ("--faster-percent", "100"),
        ("--faster-percent", "-10"),
        ("--faster-percent", "nan"),
    ],
)
def test_out_of_range_numbers_are_usage_errors_naming_the_option(traces, option, value):
    r = CliRunner().invoke(main, ["diagnose", str(traces), "--advise", option, value])
    assert r.exit_code == 2, r.output
    assert option in r.output


@pytest.mark.parametrize(
    "args",
    [["--objective-ms", "50"], ["--duration-s", "2"], ["--faster-percent", "30"]],
)
def test_advice_options_need_advise(traces, args):
    r = CliRunner().invoke(main, ["diagnose", str(traces), *args])
    assert r.exit_code == 2
    assert f"{args[0]}: only with --advise" in r.output


def test_an_unknown_model_is_a_usage_error(traces, monkeypatch):
    monkeypatch.setattr("tailscope.cli.twin.known_models", lambda: ["std-async", "coroutine"])
    r = CliRunner().invoke(main, ["diagnose", str(traces), "--advise", "--model", "goroutines"])
    assert r.exit_code == 2 and "--model: unknown model goroutines" in r.output


def test_a_validation_file_needs_advise(traces, tmp_path):
    v = tmp_path / "v.json"
    v.write_text("{}")
    r = CliRunner().invoke(main, ["diagnose", str(traces), "--validation", str(v)])
    assert r.exit_code == 2 and "--validation: only with --advise" in r.output
