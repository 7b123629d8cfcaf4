"""Every `tailscope …` command shown in README.md and docs/*.md parses.

Each command is taken from inline code and code blocks, its placeholders
normalized (`[--full]` -> `--full`, `FILE…` -> `FILE`, `a|b` -> `a`), and run
through click's parser with --help appended: --help is eager, so arguments are
not validated, but an unknown subcommand or option (`run --only`) fails."""

from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from conftest import REPO
from tailscope.cli import main

_CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.S)
_COMMAND = re.compile(r"(?:^|[\s/])tailscope((?:\s+[^\s#`]+)+)")


def shown_commands() -> list[tuple[str, str]]:
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block, inline in _CODE.findall(doc.read_text()):
            for line in (block or inline).splitlines():
                line = re.sub(r"\s#.*$", "", line.rstrip("\\").strip())
                m = _COMMAND.search(line)
                if m:
                    found.append((doc.name, m.group(1).strip()))
    return found


def _normalize(command: str) -> list[str]:
    words = []
    for word in shlex.split(command.replace("…", "")):
        word = word.strip("[]")
        if not word or word == "...":
            continue
        words.append(word.split("|")[0] if word.startswith("-") or "|" in word else word)
    return words


def test_the_docs_show_commands_at_all():
    commands = {c.split()[0] for _, c in shown_commands()}
    assert {"run", "bench", "analyze", "runs", "report", "export", "doctor"} <= commands


@pytest.mark.parametrize("doc, command", shown_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_command_shown_in_the_docs_parses(doc, command):
    r = CliRunner().invoke(main, [*_normalize(command), "--help"], prog_name="tailscope")
    assert r.exit_code == 0, f"{doc}: `tailscope {command}` does not parse: {r.output}"
