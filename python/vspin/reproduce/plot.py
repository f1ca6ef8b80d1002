"""One PNG per figure: our series solid, the paper's dashed (lines) or hatched (bars).

A configuration has one colour in both, so ours and the paper's read as a pair. Matplotlib is
used through its object API with the Agg canvas: no pyplot state, no display needed, and the same
figure gives the same bytes.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure as Canvas
from matplotlib.ticker import MaxNLocator

from vspin.reproduce.model import Figure, Series


def _curves(figure: Figure) -> list[tuple[Series, bool, str]]:
    """(series, is_paper, colour) grouped by configuration: ours, then the paper's."""
    configs = list(dict.fromkeys(s.config for s in figure.series + figure.paper))
    palette = matplotlib.colormaps["tab10" if len(configs) <= 10 else "tab20"].colors
    curves = []
    for i, config in enumerate(configs):
        colour = palette[i % len(palette)]
        curves += [(s, False, colour) for s in figure.series if s.config == config]
        curves += [(s, True, colour) for s in figure.paper if s.config == config]
    return curves


def x_text(x) -> str:
    """An x value as a label: 10.0 reads "10"."""
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def _categories(curves: list[tuple[Series, bool, str]]) -> list:
    """Every x of every curve, in order of first appearance (bars and labels share slots)."""
    return list(dict.fromkeys(x for s, _, _ in curves for x in s.x))


def _nan(values: list[float | None] | None) -> list[float] | None:
    return None if values is None else [math.nan if v is None else v for v in values]


def _errors(yerr: list | None) -> list | None:
    """matplotlib's `yerr`: half-widths as they are; with any (below, above) pair, the two rows
    of below and above distances."""
    if yerr is None or not any(isinstance(e, list) for e in yerr):
        return _nan(yerr)
    pairs = [e if isinstance(e, list) else [e, e] for e in yerr]
    return [_nan([p[0] for p in pairs]), _nan([p[1] for p in pairs])]


def _label(s: Series, paper: bool) -> str:
    return f"{s.config} (paper)" if paper else s.config


#: Our series' markers, one shape each, so that series with the same values stay told apart.
MARKERS = ("o", "^", "v", "D", "P", "X", "*", "<", ">", "h")


def _lines(ax, curves: list[tuple[Series, bool, str]]) -> None:
    categorical = any(isinstance(x, str) for s, _, _ in curves for x in s.x)
    position = {x: i for i, x in enumerate(_categories(curves))} if categorical else None
    ours = 0
    for s, paper, colour in curves:
        xs = [position[x] for x in s.x] if categorical else s.x
        # Configurations often run alike (the OTICKET halves, HVM and longer spinning): each of
        # ours is drawn thinner and with smaller markers than the one before, so a series lying on
        # an earlier one shows inside it instead of hiding it.
        width, size = (1.5, 6) if paper else (max(4.5 - 0.8 * ours, 1.0), max(12 - 1.5 * ours, 4))
        ax.errorbar(
            xs, _nan(s.y), yerr=_errors(s.yerr), color=colour, capsize=3, label=_label(s, paper),
            linestyle="--" if paper else "-", linewidth=width, markersize=size,
            marker="s" if paper else MARKERS[ours % len(MARKERS)], markerfacecolor="none" if paper else colour,
        )
        ours += not paper
    if categorical:
        ax.set_xticks(range(len(position)), [x_text(x) for x in position])
    elif all(isinstance(x, int) for s, _, _ in curves for x in s.x):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # vCPUs, VMs: no 2.5 ticks


def _bars(ax, curves: list[tuple[Series, bool, str]]) -> None:
    position = {x: i for i, x in enumerate(_categories(curves))}
    width = 0.8 / max(len(curves), 1)
    for j, (s, paper, colour) in enumerate(curves):
        xs = [position[x] - 0.4 + width * (j + 0.5) for x in s.x]
        ax.bar(
            xs, _nan(s.y), width, yerr=_errors(s.yerr), capsize=2, label=_label(s, paper),
            facecolor="none" if paper else colour, edgecolor=colour, hatch="//" if paper else None,
        )
    ax.set_xticks(range(len(position)), [x_text(x) for x in position])


def plot(figure: Figure, path: Path) -> None:
    """Draw ``figure`` into the PNG file ``path``."""
    canvas = Canvas(figsize=(8.5, 4.5), dpi=100, layout="constrained")
    ax = canvas.add_subplot()
    curves = _curves(figure)
    (_bars if figure.kind == "bar" else _lines)(ax, curves)
    ax.set_title(textwrap.fill(f"{figure.id}: {figure.title}", 70), fontsize="medium")
    ax.set_xlabel(figure.x_label)
    ax.set_ylabel(figure.y_label)
    ax.set_yscale(figure.y_scale)
    ax.grid(alpha=0.3)
    if curves:
        # Beside the axes, not on them: bars and curves stay visible whatever their heights.
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    canvas.savefig(path, format="png")
