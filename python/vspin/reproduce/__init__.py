"""Reproducing the seed papers' experiments: figures beside the paper's values, and trend checks.

An experiment module (``vspin/experiments/<name>.py``) subclasses ``Experiment`` and registers an
instance::

    from vspin.reproduce import Check, Experiment, Figure, Series, register

    class PTicket(Experiment):
        name, title, source = "pticket", "Preemptable ticket spinlocks", "pticket.pdf"

        def run(self, scale, runner):
            results = runner.run_many(scenarios)      # parallel, in input order
            ...
            return [Figure(...)], [Check(...)]

    register(PTicket())

``reproduce(name, scale, out, workers, verbose=False, store=None)`` (the ``vspin reproduce``
command) runs it and writes ``out/<name>/results.json``, one PNG per figure and ``index.html``;
with ``store``, every run is kept in that DuckDB file as it finishes and reused on a rerun.
``compare.compare(old, new)`` (``vspin compare-reports``) says which checks changed verdict or
numbers between two reports.
"""

from vspin.reproduce.driver import reproduce
from vspin.reproduce.model import SCALES, Check, Experiment, Figure, Series
from vspin.reproduce.registry import EXPERIMENTS, UnknownExperimentError, load_experiments, register
from vspin.reproduce.runner import Runner

__all__ = [
    "EXPERIMENTS",
    "SCALES",
    "Check",
    "Experiment",
    "Figure",
    "Runner",
    "Series",
    "UnknownExperimentError",
    "load_experiments",
    "register",
    "reproduce",
]
