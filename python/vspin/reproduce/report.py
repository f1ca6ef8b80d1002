"""Writing an experiment's report: results.json, one PNG per figure and a static index.html.

Everything written is a function of the results alone (no dates, no wall times), so the same
scenarios and seeds give the same bytes and two reports can be compared with ``diff``. The HTML
is built here with ``html.escape`` rather than a template engine: it is one page of tables, and
the page must open from the file system in any browser, so it links only the PNGs beside it.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from vspin.reproduce.model import Check, Experiment, Figure
from vspin.reproduce.plot import plot, x_text

_STYLE = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; }
.pass { background: #e3f4e1; color: #1b5e20; }
.fail { background: #fbe3e1; color: #b71c1c; }
.checks li { padding: 0.2em 0.5em; margin: 0.2em 0; list-style: none; }
.note { color: #555; }
"""


def document(experiment: Experiment, scale: str, figures: list[Figure], checks: list[Check]) -> dict:
    """The content of results.json."""
    return {
        "experiment": experiment.name,
        "scale": scale,
        "figures": [f.to_dict() for f in figures],
        "checks": [c.to_dict() for c in checks],
    }


def passed_text(verdicts: list[bool]) -> str:
    return f"{sum(verdicts)} of {len(verdicts)} checks passed"


def write(experiment: Experiment, scale: str, figures: list[Figure], checks: list[Check], directory: Path) -> dict:
    """Write the report of one experiment into ``directory``; returns the results document."""
    directory.mkdir(parents=True, exist_ok=True)
    doc = document(experiment, scale, figures, checks)
    (directory / "results.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    for figure in figures:
        plot(figure, directory / f"{figure.id}.png")
    (directory / "index.html").write_text(_experiment_page(experiment, scale, figures, checks))
    return doc


def write_index(experiments: list[Experiment], docs: dict[str, dict], directory: Path) -> None:
    """Write ``directory``/index.html, linking the report of every experiment in ``docs`` (its
    results document by name), each at the scale it was run at."""
    rows = []
    for experiment in experiments:
        doc = docs[experiment.name]
        checks = doc["checks"]
        verdict = "pass" if all(c["passed"] for c in checks) else "fail"
        rows.append(
            f'<tr><td><a href="{escape(experiment.name)}/index.html">{escape(experiment.name)}</a></td>'
            f"<td>{escape(experiment.title)}</td><td>{escape(experiment.source)}</td><td>{escape(doc['scale'])}</td>"
            f'<td class="{verdict}">{passed_text([c["passed"] for c in checks])}</td></tr>'
        )
    every = [c["passed"] for doc in docs.values() for c in doc["checks"]]
    scales = sorted({doc["scale"] for doc in docs.values()})
    scale = f"Scale: {scales[0]}" if len(scales) == 1 else "Scales differ (the table gives each experiment's)"
    body = (
        f"<h1>vspin: reproduced experiments</h1>\n<p>{escape(scale)}"
        + (" (shorter runs and fewer seeds than the full scale, sized for a laptop; each figure's note gives its run "
           "length and seeds)" if scales == ["quick"] else "") + f". {passed_text(every)}. Each figure draws the "
        "papers' numbers, where their text gives them, beside ours: hatched bars or dashed lines marked "
        "\"(paper)\"; a check's detail gives the paper's number after \"paper\" (\"e-mail\" for the Xen "
        "e-mail), and \"seeds 1-3\" are random seeds. Each experiment's page names the document of the vspin "
        "source tree that explains its results, failed checks included. Each experiment's results.json holds "
        "every check's numbers for scripts (measured, and the paper's under the same names: "
        "docs/results.md in the source tree).</p>\n"
        "<table>\n<tr><th>experiment</th><th>title</th><th>source</th><th>scale</th><th>checks</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>"
    )
    (directory / "index.html").write_text(_page("vspin: reproduced experiments", body))


def write_summary(docs: dict[str, dict], directory: Path) -> None:
    """Write ``directory``/summary.json: each experiment's scale and verdicts, for scripts that
    want the pass counts without reading every results.json."""
    experiments = []
    for name in sorted(docs):
        checks = docs[name]["checks"]
        experiments.append({
            "experiment": name,
            "scale": docs[name]["scale"],
            "checks": len(checks),
            "passed": sum(bool(c["passed"]) for c in checks),
            "failed": [c["id"] for c in checks if not c["passed"]],
        })
    summary = {
        "checks": sum(e["checks"] for e in experiments),
        "passed": sum(e["passed"] for e in experiments),
        "experiments": experiments,
    }
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n"
        "<footer><p class=\"note\">Generated by <code>vspin reproduce</code>.</p></footer>\n"
        "</body>\n</html>\n"
    )


def _experiment_page(experiment: Experiment, scale: str, figures: list[Figure], checks: list[Check]) -> str:
    summary = passed_text([c.passed for c in checks])
    verdict = "pass" if all(c.passed for c in checks) else "fail"
    parts = [
        f"<h1>{escape(experiment.title)}</h1>",
        f"<p>Experiment <code>{escape(experiment.name)}</code>, from {escape(experiment.source)}; "
        f"scale: {escape(scale)}.</p>",
        f'<p class="{verdict}">{summary}.</p>',
    ]
    failed = [c for c in checks if not c.passed]
    if failed:
        links = ", ".join(f'<a href="#{escape(c.figure)}">{escape(c.id)}</a>' for c in failed)
        parts.append(f"<p>Failed: {links}.</p>")
    if experiment.explained_in:
        parts.append(
            f"<p>How the model reaches these results, what it leaves out, and what is known of why checks fail: "
            f"<code>{escape(experiment.explained_in)}</code> in the vspin source tree.</p>"
        )
    for figure in figures:
        parts.append(_figure_section(figure, [c for c in checks if c.figure == figure.id]))
    return _page(f"vspin reproduce: {experiment.title}", "\n".join(parts))


def _figure_section(figure: Figure, checks: list[Check]) -> str:
    parts = [
        f'<section id="{escape(figure.id)}">',
        f"<h2>{escape(figure.id)}: {escape(figure.title)}</h2>",
        f'<img src="{escape(figure.id)}.png" alt="{escape(figure.title)}">',
        _values_table(figure),
    ]
    if figure.note:
        parts.append(f'<p class="note">{escape(figure.note)}</p>')
    if checks:
        parts.append('<ul class="checks">')
        for c in checks:
            verdict = "pass" if c.passed else "fail"
            parts.append(
                f'<li class="{verdict}"><b>{verdict.upper()}</b> <code>{escape(c.id)}</code>: {escape(c.detail)}</li>'
            )
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def _values_table(figure: Figure) -> str:
    """Our value beside the paper's for every (configuration, x) either reports."""
    cells: dict[tuple, list] = {}
    for column, group in ((0, figure.series), (1, figure.paper)):
        for s in group:
            for i, (x, y) in enumerate(zip(s.x, s.y)):
                error = s.yerr[i] if s.yerr is not None else None
                cells.setdefault((s.config, x), [None, None])[column] = (y, error)
    order = {config: i for i, config in enumerate(dict.fromkeys(config for config, _ in cells))}
    rows = [
        f"<tr><td>{escape(config)}</td><td>{escape(x_text(x))}</td>"
        f"<td>{_value_text(ours)}</td><td>{_value_text(paper)}</td></tr>"
        for (config, x), (ours, paper) in sorted(cells.items(), key=lambda item: order[item[0][0]])
    ]
    return (
        f"<table>\n<tr><th>config</th><th>{escape(figure.x_label)}</th>"
        f"<th>ours ({escape(figure.metric)})</th><th>paper</th></tr>\n" + "\n".join(rows) + "\n</table>"
    )


def _value_text(cell: tuple | None) -> str:
    if cell is None or cell[0] is None:
        return "&ndash;"
    value, error = cell
    if isinstance(error, list):  # (below, above): the interval itself
        if None in error:
            return _number_text(value)
        return f"{_number_text(value)} ({_number_text(value - error[0])}&ndash;{_number_text(value + error[1])})"
    return _number_text(value) + (f" &plusmn; {_number_text(error)}" if error is not None else "")


def _number_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
