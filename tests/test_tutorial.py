"""`docs/tutorial.md` shows what its commands print, and for the simulations it promises the same
bytes for the same scenario and seed. These tests run each simulating command of the page on the
page's own `my-host.toml` and compare its output with the page, line by line: a `…` on the page
stands for lines it leaves out, or for the rest of a line. A change of the model that moves a
number shown there fails here, so that the page is run again with it (section 5 runs real threads,
whose numbers are the machine's, and is left out).
"""
import re
import shlex
from pathlib import Path

import pytest

from vspin.cli import main

TUTORIAL = (Path(__file__).resolve().parent.parent / "docs" / "tutorial.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", TUTORIAL, re.DOTALL)
MY_HOST = next(body for lang, body in BLOCKS if lang == "toml")


def shown_commands() -> list[tuple[list[str], list[str]]]:
    """Each `$ vspin …` block of the page: the command's arguments and the output shown.

    A `…` among the arguments stands for the previous command's arguments after the same ones.
    """
    commands = []
    for lang, body in BLOCKS:
        lines = body.splitlines()
        if lang != "text" or not lines or not lines[0].startswith("$ vspin "):
            continue
        command = lines.pop(0)
        while command.endswith("\\"):
            command = command[:-1] + lines.pop(0)
        args = shlex.split(command[len("$ vspin "):], comments=True)
        if "…" in args:
            at = args.index("…")
            previous = commands[-1][0]
            assert previous[:at] == args[:at], f"{command!r} does not continue the command before it"
            args = args[:at] + previous[at:] + args[at + 1:]
        commands.append((args, lines))
    return commands


def assert_shows(page_lines: list[str], printed: str) -> None:
    """The page's lines appear in the printed output in the same order, each whole, or up to its
    `…` where it has one; a line of just `…` stands for any number of lines."""
    printed_lines = [line.rstrip() for line in printed.splitlines()]
    at = 0
    for line in page_lines:
        line = line.rstrip()
        if line in ("", "…"):
            continue
        if "…" in line:
            prefix = line.split("…")[0]
            found = next((i for i in range(at, len(printed_lines)) if printed_lines[i].startswith(prefix)), None)
        else:
            found = next((i for i in range(at, len(printed_lines)) if printed_lines[i] == line), None)
        assert found is not None, f"the page shows {line!r}, which the command no longer prints:\n{printed}"
        at = found + 1


SIMULATING = [(args, lines) for args, lines in shown_commands() if args[0] in ("run", "sweep")]


def test_the_page_shows_its_simulations():
    # Sections 2 to 4: two runs, one over seeds, two sweeps.
    assert [args[0] for args, _ in SIMULATING] == ["run", "run", "run", "sweep", "sweep"]


@pytest.mark.parametrize("args, page_lines", SIMULATING, ids=[" ".join(a) for a, _ in SIMULATING])
def test_a_simulation_prints_what_the_page_shows(args, page_lines, tmp_path, monkeypatch, capsys):
    (tmp_path / "my-host.toml").write_text(MY_HOST)
    monkeypatch.chdir(tmp_path)
    assert main(args) == 0
    assert_shows(page_lines, capsys.readouterr().out)


def test_a_missing_lock_is_named_as_the_page_shows(tmp_path, monkeypatch, capsys):
    # Section 1: "with the db VM's lock line deleted".
    [(args, page_lines)] = [(a, lines) for a, lines in shown_commands() if a[0] == "validate"]
    without_lock = re.sub(r'(?m)^lock = "pv-qspinlock".*\n', "", MY_HOST, count=1)
    assert without_lock != MY_HOST
    (tmp_path / "my-host.toml").write_text(without_lock)
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    printed = capsys.readouterr()
    assert_shows(page_lines, printed.out + printed.err)
