"""Which experiments exist: every module of ``vspin.experiments`` registers its own.

Experiment modules register themselves at import, so adding a seed's reproduction means adding
one file and touching nothing here or in the command line.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from vspin.reproduce.model import Experiment

EXPERIMENTS: dict[str, Experiment] = {}

# "all" is the command line's word for every experiment.
_NAME = re.compile(r"(?!all\Z)[a-z0-9][a-z0-9_-]*\Z")


class UnknownExperimentError(ValueError):
    """A name that no registered experiment has; the message lists the known names."""


def register(experiment: Experiment) -> Experiment:
    """Make ``experiment`` available to ``reproduce`` under its ``name``; returns it.

    Registering the same class again (a module re-imported) replaces it; a second class
    claiming a registered name is an error, as one of the two would silently vanish.
    """
    for attribute in ("name", "title", "source"):
        if not isinstance(getattr(experiment, attribute, None), str):
            raise ValueError(f"{type(experiment).__qualname__}: set the class attribute {attribute!r} (a string)")
    name = experiment.name
    if not _NAME.match(name):
        raise ValueError(f"experiment name {name!r}: use lower-case letters, digits, '_' and '-', not 'all'")
    existing = EXPERIMENTS.get(name)
    if existing is not None and _qualified(existing) != _qualified(experiment):
        raise ValueError(f"experiment {name!r} is registered twice: {_qualified(existing)} and {_qualified(experiment)}")
    EXPERIMENTS[name] = experiment
    return experiment


def _qualified(experiment: Experiment) -> str:
    cls = type(experiment)
    return f"{cls.__module__}.{cls.__qualname__}"


def load_experiments() -> dict[str, Experiment]:
    """Import every module of ``vspin.experiments`` (each registers itself); returns the registry."""
    import vspin.experiments

    for module in pkgutil.iter_modules(vspin.experiments.__path__):
        importlib.import_module(f"vspin.experiments.{module.name}")
    return EXPERIMENTS


def select(name: str) -> list[str]:
    """The experiment names that ``name`` means: itself, or every registered one for "all"."""
    if name == "all":
        return sorted(EXPERIMENTS)
    if name not in EXPERIMENTS:
        known = ", ".join([*sorted(EXPERIMENTS), "all"])
        raise UnknownExperimentError(f"unknown experiment {name!r}; known: {known}")
    return [name]
