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


def load_scenario(scenario: Scenario, settings: dict[str, Any] | None = None, **overrides: Any) -> dict:
    """Return the scenario as a dict: from a path, a TOML string, or a dict (copied).

    ``settings`` maps dotted paths to values (``{"vm.*.lock": "tas", "hypervisor.ple.policy":
    "off"}``; ``*`` means every element of a list); keyword arguments override top-level keys
    (``seed``, ``duration_ms``, ``name``).
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
    for path, value in (settings or {}).items():
        _apply_setting(data, path, value)
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
    return data


def parse_setting(text: str) -> tuple[str, Any]:
    """Parse ``path=value`` from the command line; the value is read as TOML (``16``, ``2.5``,
    ``true``, ``[0, 1]``) or else taken as a plain string (``tas``)."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise ScenarioError(f"--set {text!r}: expected PATH=VALUE, e.g. vm.*.lock=tas")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path.strip(), value


def _apply_setting(node: Any, path: str, value: Any) -> None:
    keys = path.split(".")
    targets = [node]
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        where = ".".join(keys[: depth + 1])
        following = []
        for t in targets:
            if isinstance(t, list):
                if key == "*":
                    items = range(len(t))
                elif key.isdigit() and int(key) < len(t):
                    items = [int(key)]
                else:
                    raise ScenarioError(f"setting {path}: {where} does not exist; the list has {len(t)} entries (use 0..{len(t) - 1} or *)")
                for i in items:
                    if last:
                        t[i] = value
                    else:
                        following.append(t[i])
            elif isinstance(t, dict):
                if last:
                    t[key] = value
                else:
                    following.append(t.setdefault(key, {}))
            else:
                raise ScenarioError(f"setting {path}: {'.'.join(keys[:depth])} is a value, not a table")
        targets = following


def _to_json(data: dict) -> str:
    return json.dumps(data, sort_keys=True)


def validate(scenario: Scenario, settings: dict[str, Any] | None = None, **overrides: Any) -> dict:
    """Check a scenario without running it; returns it as a dict or raises ScenarioError."""
    data = load_scenario(scenario, settings, **overrides)
    try:
        _core.validate_json(_to_json(data))
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    return data


def run(scenario: Scenario, settings: dict[str, Any] | None = None,
        timeline: tuple[float, float] | None = None, **overrides: Any) -> Result:
    """Simulate a scenario. Raises ScenarioError for bad input and RuntimeError if the run
    broke an invariant (mutual exclusion, FIFO hand-off, lost wake-up).

    ``timeline=(from_ms, to_ms)`` also records what every vCPU did in that window, as Chrome
    trace JSON in ``Result.timeline`` (open it in https://ui.perfetto.dev or chrome://tracing).
    """
    data = load_scenario(scenario, settings, **overrides)
    trace = None
    try:
        if timeline is None:
            raw = _core.run_json(_to_json(data))
        else:
            raw, trace = _core.run_json_with_timeline(_to_json(data), float(timeline[0]), float(timeline[1]))
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    return Result(json.loads(raw), data, trace)
