"""Loading scenarios and running them through the Rust core."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Union

from vspin import _core
from vspin.result import Result

Scenario = Union[str, os.PathLike, dict]


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names the field and the allowed values."""


def load_scenario(scenario: Scenario, **overrides: Any) -> dict:
    """Return the scenario as a dict: from a path, a TOML string, or a dict (copied).

    Keyword arguments override top-level keys (``seed``, ``duration_ms``, ``name``).
    """
    if isinstance(scenario, dict):
        data = json.loads(json.dumps(scenario))
    else:
        text = str(scenario)
        is_path = isinstance(scenario, os.PathLike) or (
            "\n" not in text and "=" not in text
        )
        if is_path:
            path = Path(scenario)
            if not path.is_file():
                raise ScenarioError(f"scenario file not found: {path}")
            text = path.read_text()
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"TOML syntax: {e}") from None
        if is_path and "name" not in data:
            data["name"] = Path(scenario).stem
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
    return data


def _to_json(data: dict) -> str:
    return json.dumps(data, sort_keys=True)


def validate(scenario: Scenario, **overrides: Any) -> dict:
    """Check a scenario without running it; returns it as a dict or raises ScenarioError."""
    data = load_scenario(scenario, **overrides)
    try:
        _core.validate_json(_to_json(data))
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    return data


def run(scenario: Scenario, **overrides: Any) -> Result:
    """Simulate a scenario. Raises ScenarioError for bad input and RuntimeError if the run
    broke an invariant (mutual exclusion, FIFO hand-off, lost wake-up)."""
    data = load_scenario(scenario, **overrides)
    try:
        raw = _core.run_json(_to_json(data))
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    return Result(json.loads(raw), data)
