"""Every number a user can type into `tailscope` is one option type: finite, range-checked, and the
message names the option. Walks every command's options, so a new option cannot skip the check."""

from __future__ import annotations

import math

import click
import pytest
from click.testing import CliRunner

from tailscope.cli import main
from tailscope.cli.common import Number


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def _numeric_options():
    out = []
    for path, cmd in _commands(main):
        for p in cmd.params:
            if isinstance(p, click.Option) and isinstance(p.type, (click.types._NumberParamTypeBase, click.FloatRange)):
                out.append((path, p))
    return out


NUMERIC = _numeric_options()
IDS = [f"{' '.join(path)} {p.opts[0]}" for path, p in NUMERIC]


def test_the_walk_finds_the_numeric_options():
    assert len(NUMERIC) >= 15, IDS
    assert any(p.opts[0] == "--objective-ms" for _, p in NUMERIC)


@pytest.mark.parametrize(("path", "param"), NUMERIC, ids=IDS)
def test_every_numeric_option_is_bounded_on_both_sides(path, param):
    t = param.type
    assert isinstance(t, (Number, click.IntRange)), f"{' '.join(path)} {param.opts[0]}: {t!r} is not a range type"
    assert t.min is not None and t.max is not None, f"{' '.join(path)} {param.opts[0]}: unbounded {t!r}"


@pytest.mark.parametrize(("path", "param"), NUMERIC, ids=IDS)
@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "-1", "0", "1e308", "0x10"])
def test_a_typed_number_is_refused_or_finite_and_in_range(path, param, text):
    ctx = click.Context(main)
    try:
        value = param.type_cast_value(ctx, text)
    except click.BadParameter as e:
        assert param.opts[0] in e.format_message() or e.param is param
        return
    values = value if isinstance(value, tuple) else (value,)
    assert values, text
    for v in values:
        assert math.isfinite(v), (path, param.opts[0], text, v)
        t = param.type
        assert t.min <= v <= t.max, (path, param.opts[0], text, v)
    assert text not in ("nan", "inf", "-inf", "0x10"), f"{param.opts[0]} accepted {text!r} as {value!r}"


@pytest.mark.parametrize(
    "args",
    [
        ["advise", "--objective-ms", "nan", "x.json"],
        ["analyze", "--stagger-window-us", "nan", "x.json"],
        ["deploy", "k8s", "--topology", "t.yaml", "--out", "o", "--trace-sample", "nan"],
        ["twin", "validate", "--rate-per-s", "nan"],
        ["run", "--scale", "inf"],
    ],
)
def test_the_commands_the_probes_hit_refuse_nan_before_any_work(args, tmp_path, monkeypatch):
    monkeypatch.setenv("TAILSCOPE_RESULTS", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "not a finite number" in r.output, r.output
    assert not (tmp_path / "results").exists() and not (tmp_path / "o").exists()
