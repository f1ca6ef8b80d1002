"""Comparing two reports of ``vspin reproduce``: which checks changed verdict, and which numbers.

A reproduction's failed checks are not news by themselves (``docs/mechanisms/`` explains each);
what a user who changed the model, a scenario default or the machine wants to know is what
*moved*. ``compare(old, new)`` reads the ``results.json`` of every experiment in two report
directories and sorts the checks into: now failing (passed in ``old``), now passing, detail
changed (same verdict, other numbers), and added or removed. Nothing is judged from the numbers
themselves: a check's verdict is its experiment's to give. An experiment in one report only
(a full report against one experiment rerun) is named, not counted as checks added or removed.
Where both reports give a check's ``measured`` quantities, the comparison names each that moved,
old and new value; a report written before checks carried them compares by detail alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from vspin.reproduce.model import why_malformed


class ReportError(ValueError):
    """A directory that holds no report of ``vspin reproduce``, or a results.json that is not one."""


@dataclass
class Change:
    experiment: str
    check: str
    old_detail: str | None
    new_detail: str | None
    # The verdict in the earlier report (None: the check is new).
    old_passed: bool | None = None
    # The measured quantities that differ, as (name, old value, new value); a name that only one
    # report gives has None on the other side.
    moved: list[tuple[str, object, object]] = field(default_factory=list)


@dataclass
class Comparison:
    experiments: list[str]
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    # Experiments run at another scale in the two reports, as (name, old scale, new scale).
    scales: list[tuple[str, str, str]] = field(default_factory=list)
    now_failing: list[Change] = field(default_factory=list)
    now_passing: list[Change] = field(default_factory=list)
    detail_changed: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    removed: list[Change] = field(default_factory=list)
    compared: int = 0

    @property
    def regressed(self) -> bool:
        """A check that passed fails now, or is gone from an experiment both reports hold."""
        return bool(self.now_failing) or any(ch.old_passed for ch in self.removed)


def _reports(directory: Path) -> dict[str, dict]:
    """Every experiment's results document under ``directory`` (a report of "all" or of one
    experiment, or one experiment's own directory), by experiment name."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a directory")
    files = [directory / "results.json"] if (directory / "results.json").is_file() else sorted(directory.glob("*/results.json"))
    if not files:
        raise ReportError(f"{directory}: no results.json here or in its subdirectories (a report of vspin reproduce)")
    docs, where = {}, {}
    for f in files:
        try:
            doc = json.loads(f.read_text())
            name, checks = str(doc["experiment"]), doc["checks"]
            verdicts = {}
            for c in checks:
                if not isinstance(c["passed"], bool):
                    raise TypeError(f"check {c['id']}: passed is {c['passed']!r}, not true or false")
                measured = c.get("measured")
                if measured is not None and not isinstance(measured, dict):
                    raise TypeError(f"check {c['id']}: measured is {type(measured).__name__}, not named numbers")
                if str(c["id"]) in verdicts:
                    raise ValueError(f"check {c['id']} appears twice")
                verdicts[str(c["id"])] = (c["passed"], str(c["detail"]), measured)
            docs[name] = {"scale": str(doc["scale"]), "checks": verdicts}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ReportError(f"{f}: not a results.json of vspin reproduce ({why_malformed(e)})") from None
        if name in where:
            raise ReportError(f"{where[name]} and {f}: both are reports of experiment {name}")
        where[name] = f
    return docs


def compare(old: Path, new: Path) -> Comparison:
    """Compare the reports in directories ``old`` and ``new`` (see the module's doc); raises
    ReportError for a directory without a report."""
    before, after = _reports(Path(old)), _reports(Path(new))
    result = Comparison(experiments=sorted(set(before) & set(after)), only_old=sorted(set(before) - set(after)),
                        only_new=sorted(set(after) - set(before)))
    if not result.experiments:
        # Nothing compared is no verdict, not a pass (a CI gate would otherwise go green).
        raise ReportError(f"{old} and {new} share no experiment ({', '.join(sorted(before))} against "
                          f"{', '.join(sorted(after))}): nothing to compare")
    for name in result.experiments:
        a, b = before[name], after[name]
        if a["scale"] != b["scale"]:
            result.scales.append((name, a["scale"], b["scale"]))
        for check in [*a["checks"], *(c for c in b["checks"] if c not in a["checks"])]:
            was, now = a["checks"].get(check), b["checks"].get(check)
            change = Change(name, check, was and was[1], now and now[1], was and was[0],
                            _moved(was[2], now[2]) if was and now else [])
            if was is None:
                result.added.append(change)
            elif now is None:
                result.removed.append(change)
            else:
                result.compared += 1
                if was[0] and not now[0]:
                    result.now_failing.append(change)
                elif now[0] and not was[0]:
                    result.now_passing.append(change)
                elif was[1] != now[1] or change.moved:
                    result.detail_changed.append(change)
    return result


def _moved(old: dict | None, new: dict | None) -> list[tuple[str, object, object]]:
    """The quantities whose values differ between two checks' ``measured``, in the new report's
    order (then names only the old one has); none when either report lacks them."""
    if old is None or new is None:
        return []
    names = [*new, *(k for k in old if k not in new)]
    return [(k, old.get(k), new.get(k)) for k in names if old.get(k) != new.get(k)]


def _value(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "none" if v is None else str(v)


def _moved_text(name: str, old: object, new: object) -> str:
    line = f"    moved: {name} {_value(old)} → {_value(new)}"
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and old:
        line += f" ({100 * (new - old) / abs(old):+.1f}%)"
    return line


def text(c: Comparison, details: bool = False) -> str:
    """The comparison as lines for a terminal: verdict changes with both details, then (with
    ``details``) the checks whose numbers alone moved."""
    lines = []
    for names, where in ((c.only_old, "the earlier"), (c.only_new, "the later")):
        if names:
            lines.append(f"note: only {where} report holds {', '.join(names)} (not compared)")
    for name, was, now in c.scales:
        lines.append(f"note: {name} was run at {was} scale, now at {now}")
    sections = [("NOW FAILING", c.now_failing), ("NOW PASSING", c.now_passing), ("REMOVED", c.removed),
                ("ADDED", c.added)]
    if details:
        sections.append(("CHANGED", c.detail_changed))
    for title, changes in sections:
        for ch in changes:
            lines.append(f"{title} {ch.experiment} {ch.check}")
            if ch.old_detail is not None:
                lines.append(f"    was: {ch.old_detail}")
            if ch.new_detail is not None:
                lines.append(f"    now: {ch.new_detail}")
            lines.extend(_moved_text(*m) for m in ch.moved)
    lines.append(
        f"{c.compared} checks in both: {len(c.now_failing)} now failing, {len(c.now_passing)} now passing, "
        f"{len(c.detail_changed)} with other numbers and the same verdict"
        + ("" if details or not c.detail_changed else " (--details shows them)")
        + f"; {len(c.added)} added, {len(c.removed)} removed"
    )
    return "\n".join(lines)
