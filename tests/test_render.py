"""Tables on narrow terminals: ids and names are never cut, less useful columns go first (item 18)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Sequence

import pytest
from rich.console import Console

from job_chain.cli.render import make_table, styled_status

JOB_ID = "pytorchjob-2b0c6a8e-5a51-4a34-9c5d-5f6f0f2a6a53"
NAME = "llama-sft-stage-2-continue-from-ckpt"
LIST_COLUMNS = ["NAME", "JOB ID", "STATUS", "QUEUE", "PRIORITY", "AGE"]
LIST_ROWS = [[NAME, JOB_ID, styled_status("Succeeded"), "default", "normal", "3d4h"],
             ["short", "pytorchjob-0a1b2c3d-0000-4a34-9c5d-5f6f0f2a6a53", "Running", "default", "high", "5s"]]
STATUS_COLUMNS = ["STEP", "NAME", "STATUS", "ATTEMPT", "JOB ID", "STARTED", "DURATION"]
STATUS_ROWS = [["0", NAME, "Succeeded", "1", JOB_ID, "15:32:43", "1h02m"],
               ["1", "eval", "not submitted", "-", "-", "-", "-"]]


def render(columns: Sequence[str], rows: List[List[Any]], width: int, **kwargs: Any) -> List[str]:
    console = Console(width=width, color_system=None, record=True)
    console.print(make_table(columns, rows, **kwargs))
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines)
    return lines


def column(lines: List[str], header: str, after: str = "") -> str:
    """The text of one column, its wrapped pieces joined (the header line fixes the position)."""
    head = lines[0]
    start = head.index(header)
    rest = head[start + len(header):]
    next_header = len(rest) - len(rest.lstrip()) if rest.strip() else None
    end = start + len(header) + next_header if next_header is not None else None
    body = [line for line in lines[1:] if not line.startswith("(")]
    return "".join(line[start:end].strip() for line in body)


@pytest.mark.parametrize("width", [200, 80, 60, 40])
def test_ids_and_names_are_never_cut(width: int) -> None:
    lines = render(LIST_COLUMNS, LIST_ROWS, width)
    assert column(lines, "JOB ID") == JOB_ID + LIST_ROWS[1][1]
    assert column(lines, "NAME") == NAME + "short"
    lines = render(STATUS_COLUMNS, STATUS_ROWS, width)
    assert column(lines, "JOB ID") == JOB_ID + "-"


def test_at_80_columns_the_id_stays_on_one_line_and_age_goes_first() -> None:
    lines = render(LIST_COLUMNS, LIST_ROWS, 80)
    assert any(JOB_ID in line for line in lines)
    assert lines[0].split() == ["NAME", "JOB", "ID", "STATUS"]
    assert lines[-1] == "(hidden to fit: AGE, PRIORITY, QUEUE)"
    lines = render(STATUS_COLUMNS, STATUS_ROWS, 80)
    assert any(JOB_ID in line for line in lines)
    assert column(lines, "STATUS") == "Succeedednotsubmitted"  # "not submitted" wraps at its space
    assert lines[-1].startswith("(hidden to fit: ")


def test_only_as_many_columns_go_as_needed() -> None:
    lines = render(LIST_COLUMNS, LIST_ROWS, 116)  # 6 short of the whole table
    assert lines[0].split() == ["NAME", "JOB", "ID", "STATUS", "QUEUE", "PRIORITY"]
    assert lines[-1] == "(hidden to fit: AGE)"


def test_a_wide_terminal_shows_everything_without_a_note() -> None:
    lines = render(LIST_COLUMNS, LIST_ROWS, 140)
    assert lines[0].split() == ["NAME", "JOB", "ID", "STATUS", "QUEUE", "PRIORITY", "AGE"]
    assert not any(line.startswith("(hidden") for line in lines)
    assert any(JOB_ID in line and "3d4h" in line for line in lines)


def test_the_caller_chooses_what_may_go() -> None:
    lines = render(LIST_COLUMNS, LIST_ROWS, 116, droppable=["QUEUE"])
    assert lines[0].split() == ["NAME", "JOB", "ID", "STATUS", "PRIORITY", "AGE"]
    lines = render(LIST_COLUMNS, LIST_ROWS, 80, droppable=[])
    assert not any(line.startswith("(hidden") for line in lines)
    assert column(lines, "JOB ID") == JOB_ID + LIST_ROWS[1][1]


def test_free_text_wraps_instead_of_pushing_ids_out() -> None:
    message = "Back-off restarting failed container trainer in pod " + NAME + "-master-0 " * 3
    rows = [["2026-11-23T15:32:43Z", "Warning", "BackOff", "3", message]]
    lines = render(["TIME", "TYPE", "REASON", "COUNT", "MESSAGE"], rows, 80)
    assert lines[0].split() == ["TIME", "TYPE", "REASON", "COUNT", "MESSAGE"]
    assert column(lines, "MESSAGE").replace(" ", "") == message.replace(" ", "")
    assert "2026-11-23T15:32:43Z" in lines[1]


def test_piped_output_is_full_width(monkeypatch: pytest.MonkeyPatch) -> None:
    from job_chain.cli import render as render_module

    assert not render_module.console().is_terminal  # pytest captures stdout: a pipe
    assert render_module.console().width >= 1000


def test_no_cell_is_parsed_as_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text shows as given ("[/usr/bin]" once crashed the markup parser); statuses keep their color;
    and no cell goes through rich's markup parser, which made 2,000-row tables slow."""
    import rich.console
    import rich.markup

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a cell went through rich's markup parser")

    monkeypatch.setattr(rich.markup, "render", refuse)
    monkeypatch.setattr(rich.console, "render_markup", refuse)
    rows = [["0", "eval[v2]", styled_status("Failed"), "exec [/usr/bin/python] exited with code 1"]]
    table = make_table(["STEP", "NAME", "STATUS", "REASON"], rows, title="chain[1].json · run x")
    console = Console(width=120, force_terminal=True, color_system="standard", record=True)
    console.print(table)
    shown = console.export_text(styles=True)
    assert "eval[v2]" in shown and "exec [/usr/bin/python] exited" in shown and "chain[1].json" in shown
    assert "\x1b[31mFailed" in shown  # red
    assert table.plain().splitlines()[2].split() == ["0", "eval[v2]", "Failed", "exec", "[/usr/bin/python]",
                                                     "exited", "with", "code", "1"]


SHOW = ("import sys; from job_chain.cli.render import make_table, show, styled_status; "
        "show(make_table(['STEP', 'STATUS'], [['0', styled_status('Succeeded')]])); "
        "print('rich.console' in sys.modules)")


@pytest.mark.parametrize("env,colored", [({}, False), ({"FORCE_COLOR": "1"}, True), ({"TTY_COMPATIBLE": "1"}, True)])
def test_a_pipe_gets_plain_rows_without_loading_rich(env: Dict[str, str], colored: bool) -> None:
    """Into a pipe a table is plain text and rich's console (~50 modules) is never imported; what
    makes rich see a terminal anyway (FORCE_COLOR, TTY_COMPATIBLE) still gets rich's rendering."""
    clean = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    done = subprocess.run([sys.executable, "-c", SHOW], env={**clean, **env}, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    *table, loaded = done.stdout.splitlines()
    assert loaded == str(colored) and ("\x1b[" in done.stdout) == colored
    rows = [line.split() for line in table if line.strip()]
    assert rows == [["STEP", "STATUS"], ["0", "Succeeded"]] if not colored else "Succeeded" in done.stdout


@pytest.mark.parametrize("width", [200, 144])
def test_a_table_that_fits_looks_as_richs_table_would(width: int) -> None:
    """When every column fits whole, the table is drawn as lines (rich's table takes ~1 s for
    2,000 rows): the same text, column for column, with the same styles as rich's own table."""
    rows = [["0", "训练-阶段一", styled_status("Succeeded"), JOB_ID, "a reason long enough to be free text"],
            ["12", NAME, styled_status("not submitted"), "-", ""]]
    table = make_table(["STEP", "NAME", "STATUS", "JOB ID", "REASON"], rows, title="c.json · run r")
    assert sum(table.widest) + 2 * 4 == 144  # fits exactly at 144

    def shown(renderable: Any) -> List[str]:
        console = Console(width=width, force_terminal=True, color_system="standard", record=True)
        console.print(renderable)
        return [line.rstrip() for line in console.export_text(styles=True).splitlines()]

    ours, richs = shown(table), shown(table.table(list(range(5))))
    assert [strip_styles(line) for line in ours] == [strip_styles(line) for line in richs]
    assert ours[2].startswith("0     训练-阶段一 ") and "\x1b[32mSucceeded" in ours[2]
    assert "\x1b[2mnot submitted" in ours[3]
    assert ours[1].startswith("\x1b[1mSTEP") and ours[0].startswith("\x1b[3mc.json")


def strip_styles(line: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip()


def test_a_pipe_gets_every_kind_of_cell_padded_to_the_columns_it_takes() -> None:
    """Numbers show as text and None as nothing; a wide character takes two columns in the pipe's
    plain text too, so the next column starts where a terminal would show it; no rows, the headers."""
    rows = [[0, "训练", styled_status("Failed"), None], [12, "eval", "Running", 3]]
    table = make_table(["STEP", "NAME", "STATUS", "EXIT"], rows, title="c.json · run r")
    assert table.plain().splitlines() == ["c.json · run r", "STEP  NAME  STATUS   EXIT", "0     训练  Failed",
                                          "12    eval  Running  3"]
    assert render(["STEP", "NAME", "STATUS", "EXIT"], rows, 80, title="c.json · run r") == table.plain().splitlines()
    assert make_table(["A", "B"], []).plain() == "A  B"
