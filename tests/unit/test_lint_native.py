"""scripts/lint-native's clang-tidy pass key and ledger: a recorded pass may let a file skip
clang-tidy only while nothing that decides its result changed (docs/testing.md)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO


def _load_lint_native() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("lint_native", str(REPO / "scripts" / "lint-native"))
    spec = importlib.util.spec_from_loader("lint_native", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture
def lint(tmp_path, monkeypatch) -> ModuleType:
    """The script as a module, its checkout and ledger moved into tmp_path."""
    m = _load_lint_native()
    monkeypatch.setattr(m, "ROOT", tmp_path / "checkout")
    monkeypatch.setattr(m, "LEDGER", tmp_path / "checkout" / ".ci" / "tidy-ledger")
    m.LEDGER.mkdir(parents=True)
    m._digests.clear()
    return m


def _tree(root: Path, header: str = "int f();\n") -> tuple[dict, list[str], dict[str, list[str]]]:
    """One translation unit native/a.cc including native/a.h: (entry, arguments, ninja deps)."""
    (root / "native").mkdir(parents=True, exist_ok=True)
    (root / "native" / "a.h").write_text(header)
    (root / "native" / "a.cc").write_text('#include "a.h"\nint f() { return 1; }\n')
    args = ["/usr/bin/c++", f"-I{root}/native", "-o", "native/a.cc.o", "-c", f"{root}/native/a.cc"]
    entry = {"file": f"{root}/native/a.cc", "directory": f"{root}/build"}
    return entry, args, {"native/a.cc.o": [f"{root}/native/a.h"]}


def test_key_follows_every_included_header_and_the_config(lint):
    entry, args, deps = _tree(lint.ROOT)
    key = lint.tidy_key(entry, args, deps, "config-1")
    assert key == lint.tidy_key(entry, args, deps, "config-1")
    assert key != lint.tidy_key(entry, args, deps, "config-2")  # .clang-tidy or clang-tidy version changed
    lint._digests.clear()
    (lint.ROOT / "native" / "a.h").write_text("int f();\nint g();\n")
    assert key != lint.tidy_key(entry, args, deps, "config-1")
    assert key != lint.tidy_key(entry, [*args, "-DX=1"], deps, "config-1")


def test_key_is_the_same_in_another_clone(lint, tmp_path, monkeypatch):
    entry, args, deps = _tree(lint.ROOT)
    key = lint.tidy_key(entry, args, deps, "c")
    other = tmp_path / "elsewhere"
    monkeypatch.setattr(lint, "ROOT", other)
    lint._digests.clear()
    entry2, args2, deps2 = _tree(other)
    assert lint.tidy_key(entry2, args2, deps2, "c") == key


def test_key_does_not_depend_on_where_the_clone_sorts_beside_system_headers(lint, tmp_path, monkeypatch):
    """Clones under /tmp and /work sort on either side of /usr's headers: the key must not see it."""
    system = tmp_path / "m" / "usr-include-stddef.h"
    system.parent.mkdir(parents=True)
    system.write_text("typedef unsigned long size_t;\n")
    keys = []
    for where in ("a-first", "z-last"):  # one sorts before tmp_path/m, the other after it
        root = tmp_path / where
        monkeypatch.setattr(lint, "ROOT", root)
        lint._digests.clear()
        entry, args, deps = _tree(root)
        deps["native/a.cc.o"].append(str(system))
        keys.append(lint.tidy_key(entry, args, deps, "c"))
    assert keys[0] == keys[1]


def test_no_dependency_record_means_no_key_and_a_check(lint, tmp_path):
    entry, args, _ = _tree(lint.ROOT)
    assert lint.tidy_key(entry, args, {}, "c") is None
    assert lint.passed_before("native/a.cc", None, tmp_path) is None


def test_a_ledger_entry_for_other_content_does_not_skip(lint, tmp_path):
    entry, args, deps = _tree(lint.ROOT)
    no_cache = tmp_path / "empty-cache"
    old_key = lint.tidy_key(entry, args, deps, "c")
    lint.write_ledger({"native/a.cc": {old_key}})
    assert lint.passed_before("native/a.cc", old_key, no_cache) == "ledger"
    assert lint.passed_before("native/b.cc", old_key, no_cache) is None  # recorded per file
    lint._digests.clear()
    (lint.ROOT / "native" / "a.h").write_text("int f(int);\n")
    new_key = lint.tidy_key(entry, args, deps, "c")
    assert lint.passed_before("native/a.cc", new_key, no_cache) is None


def test_ledger_keeps_only_files_that_passed_in_this_build(lint):
    lint.write_ledger({"native/a.cc": {"k1"}, "native/gone.cc": {"k2"}})
    lint.write_ledger({"native/a.cc": {"k1", "k3"}, "native/failed.cc": set()})
    assert lint.ledger_keys("native/a.cc") == {"k1", "k3"}
    assert lint.ledger_keys("native/gone.cc") == set() and lint.ledger_keys("native/failed.cc") == set()
    assert sorted(f.name for f in lint.LEDGER.iterdir()) == ["native--a.cc.key"]


def test_pch_flags_are_dropped_and_other_includes_kept(lint):
    pch = "/b/CMakeFiles/tailscope_test_pch.dir/cmake_pch.hxx"
    args = ["c++", "-Winvalid-pch", "-fpch-preprocess", "-include", pch, "-include", "config.h", "-c", "x.cc"]
    assert lint.without_pch(args) == ["c++", "-include", "config.h", "-c", "x.cc"]


def test_the_tidy_identity_does_not_name_the_machines_cpu(lint):
    """`clang-tidy --version` ends with "Host CPU: znver3" on one machine and another name on the
    next: a ledger recorded on one machine matched 0 files on another CPU until this line was
    left out of the key."""
    text = "Debian LLVM version 14.0.6\n  Optimized build.\n  Default target: x86_64-pc-linux-gnu\n  Host CPU: {}\n"
    a, b = lint.tidy_identity(text.format("znver3")), lint.tidy_identity(text.format("skylake-avx512"))
    assert a == b and "14.0.6" in a and "Host CPU" not in a
    assert lint.tidy_identity(text.format("znver3")) != lint.tidy_identity(text.replace("14.0.6", "15.0.7"))
