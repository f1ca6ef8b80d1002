"""What an experiment reports: figures (our series beside the paper's) and trend checks.

These are plain dataclasses so that an experiment module only describes its results and the
report (results.json, one PNG per figure, index.html) is built from that one description. Values
are normalised on construction (numpy/pandas scalars to Python numbers, non-finite numbers to
None, i.e. "no value") because experiments compute them with pandas and the report must be
valid, deterministic JSON.
"""

from __future__ import annotations

import abc
import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vspin.reproduce.runner import Runner

KINDS = ("line", "bar")
Y_SCALES = ("linear", "log")
SCALES = ("quick", "full")

# Figure ids become file names (<id>.png) and HTML anchors.
_FILE_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


def _plain(value: Any) -> Any:
    """A numpy or pandas scalar as the Python value it holds; anything else unchanged."""
    return value.item() if hasattr(value, "item") else value


def _number(value: Any) -> float | None:
    value = _plain(value)
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass
class Series:
    """One curve (or one set of bars): a configuration's y at each x."""

    config: str
    x: list
    y: list[float]
    #: Each point's error bar: a half-width, or a pair (below, above) where the interval is not
    #: symmetric (a bootstrap interval of a ratio); None for a point without one.
    yerr: list[float | list[float] | None] | None = None

    def __post_init__(self) -> None:
        self.x = [_plain(v) for v in self.x]
        self.y = [_number(v) for v in self.y]
        if len(self.x) != len(self.y):
            raise ValueError(f"series {self.config!r}: {len(self.x)} x values but {len(self.y)} y values")
        if self.yerr is not None:
            self.yerr = [[_number(e) for e in v] if isinstance(v, (list, tuple)) else _number(v) for v in self.yerr]
            if any(isinstance(v, list) and len(v) != 2 for v in self.yerr):
                raise ValueError(f"series {self.config!r}: an asymmetric error is a pair (below, above)")
            if len(self.yerr) != len(self.y):
                raise ValueError(f"series {self.config!r}: {len(self.yerr)} yerr values for {len(self.y)} points")

    def to_dict(self) -> dict:
        doc = {"config": self.config, "x": self.x, "y": self.y}
        if self.yerr is not None:
            doc["yerr"] = self.yerr
        return doc


@dataclass
class Figure:
    """One of the paper's figures or tables: our series and the values the paper reports."""

    id: str
    title: str
    metric: str
    x_label: str
    y_label: str
    series: list[Series]
    paper: list[Series]
    kind: str = "line"
    note: str = ""
    y_scale: str = "linear"

    def __post_init__(self) -> None:
        if not _FILE_SAFE.match(self.id):
            raise ValueError(f"figure id {self.id!r}: use letters, digits, '_', '.', '-' (it names a file)")
        if self.kind not in KINDS:
            raise ValueError(f"figure {self.id}: kind {self.kind!r}, expected one of {', '.join(KINDS)}")
        if self.y_scale not in Y_SCALES:
            raise ValueError(f"figure {self.id}: y_scale {self.y_scale!r}, expected one of {', '.join(Y_SCALES)}")
        for side, group in (("series", self.series), ("paper", self.paper)):
            configs = [s.config for s in group]
            if len(set(configs)) != len(configs):
                raise ValueError(f"figure {self.id}: {side} repeats a config: {configs}")

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "metric": self.metric,
            "x_label": self.x_label,
            "y_label": self.y_label,
            "kind": self.kind,
            "y_scale": self.y_scale,
            "note": self.note,
            "series": [s.to_dict() for s in self.series],
            "paper": [s.to_dict() for s in self.paper],
        }


# A measured quantity's name in results.json: a lower-case identifier, so that scripts can use it
# as a column name.
_QUANTITY = re.compile(r"[a-z][a-z0-9_]*\Z")


def _quantities(check: str, side: str, values: Any) -> dict[str, Any]:
    """``values`` (name → number, or name → list of numbers) normalised like a series' y."""
    if not isinstance(values, dict):
        raise TypeError(f"check {check}: {side} is a dict of named numbers, not {type(values).__name__}")
    out = {}
    for name, value in values.items():
        if not isinstance(name, str) or not _QUANTITY.match(name):
            raise ValueError(f"check {check}: {side} name {name!r}: use lower-case letters, digits and '_'")
        try:
            out[name] = [_count_or_number(v) for v in value] if isinstance(value, (list, tuple)) else _count_or_number(value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"check {check}: {side} {name}: {e}") from None
    return out


def _count_or_number(value: Any) -> int | float | None:
    """An integer (a count, a vCPU count) stays one; anything else is a number as in a series."""
    value = _plain(value)
    if isinstance(value, bool):
        raise TypeError("a number, not true or false")
    return value if isinstance(value, int) else _number(value)


@dataclass
class Check:
    """A trend the paper claims (direction, ordering, rough factor) and whether we reproduce it.

    ``detail`` says in words what was measured, the claim and the rule that judged it, so a
    failure can be judged without re-running. ``measured`` holds the same numbers for scripts:
    each quantity the verdict is computed from, by name (a number, or a list of numbers where the
    verdict reads a series, with the series' x values beside it under their own name; a 95%
    interval as ``<name>_low`` and ``<name>_high``). ``paper`` gives the paper's value of those
    quantities, under the same names, where the paper states one. The verdict itself is the
    experiment's code; the names let a script re-judge a check by another rule, or
    ``vspin compare-reports`` say which number moved.
    """

    id: str
    figure: str
    passed: bool
    detail: str
    measured: dict[str, Any]
    paper: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Comparisons of numpy numbers give numpy.bool_, which JSON cannot encode.
        self.passed = bool(self.passed)
        self.measured = _quantities(self.id, "measured", self.measured)
        self.paper = _quantities(self.id, "paper", self.paper)
        if not self.measured:
            raise ValueError(f"check {self.id}: measured names no quantity; a verdict is computed from numbers")
        unknown = sorted(set(self.paper) - set(self.measured))
        if unknown:
            raise ValueError(f"check {self.id}: paper gives {', '.join(unknown)}, which measured does not have")

    def to_dict(self) -> dict:
        return {"id": self.id, "figure": self.figure, "passed": self.passed, "detail": self.detail,
                "measured": self.measured, "paper": self.paper}


def why_malformed(error: Exception) -> str:
    """What is wrong with a results.json that could not be read back, in words: the reading
    code indexes the document directly, so a missing key or a wrong type surfaces as Python's
    own exception, whose text alone ("'detail'") would not say."""
    if isinstance(error, KeyError):
        return f"no key {error.args[0]!r}"
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON: {error}"
    if isinstance(error, TypeError) and any(
            sign in str(error) for sign in ("indices must be", "not subscriptable", "not iterable")):
        return "an entry that should be a JSON object or list is something else"
    return str(error)


class Experiment(abc.ABC):
    """One seed's group of experiments; a module in ``vspin.experiments`` subclasses this and
    registers an instance with ``vspin.reproduce.register``.

    ``run`` builds its scenarios for the scale (``"quick"``: keeps the trend, runs in CI on 2
    cores; ``"full"``: the paper's host), runs them through ``runner`` (which parallelises and
    keeps input order) and returns its figures and checks; it writes no files.
    """

    name: str
    title: str
    # The paper: authors, title, venue and year.
    source: str
    # Where the source tree explains how the model reaches each result, and why the checks that
    # fail do (a path in the vspin repository), if anywhere.
    explained_in: str | None = None

    @abc.abstractmethod
    def run(self, scale: str, runner: Runner) -> tuple[list[Figure], list[Check]]:
        ...
