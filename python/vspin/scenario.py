"""Loading scenarios and running them through the Rust core."""

from __future__ import annotations

import copy
import datetime
import decimal
import json
import math
import os
import re
import stat
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
        try:
            scenario = plain_value(scenario)
            _check_document(scenario)
            data = json.loads(json.dumps(scenario))
        except RecursionError:
            raise ScenarioError(f"scenario: {_TOO_DEEP}") from None
    elif isinstance(scenario, (str, os.PathLike)):
        text = str(scenario)
        if not text.strip():
            raise ScenarioError("scenario: empty; give a file path, TOML text or a dict")
        # Text with a line break is TOML; a one-line string is a path if such a file exists (even
        # with an '=' in its name, as in ple=off.toml), else TOML if it has an '=', else a path.
        is_path = isinstance(scenario, os.PathLike) or ("\n" not in text and (_exists(text) or "=" not in text))
        if is_path:
            text = _read_scenario_file(Path(scenario))
        try:
            data = _loads(text)
        except tomllib.TOMLDecodeError as e:
            if "\n" not in text:  # one line: most likely a mistyped file name with an '=' in it
                raise ScenarioError(f"scenario file not found: {text} (nor is it TOML text: {e})") from None
            raise ScenarioError(f"TOML syntax: {e}{_quoted_line(text, str(e))}") from None
        _check_document(data)
        if is_path and "name" not in data:
            data["name"] = Path(scenario).stem
    else:
        raise ScenarioError(f"scenario: expected a file path, TOML text or a dict, got {type(scenario).__name__}")
    if settings is not None and not isinstance(settings, dict):
        raise ScenarioError(f"settings: expected a dict of paths to values, e.g. {{'vm.*.lock': 'tas'}}, "
                            f"got {type(settings).__name__}")
    reached: list[tuple[str, list[tuple]]] = []
    for path, value in (settings or {}).items():
        if not isinstance(path, str):
            raise ScenarioError(f"settings: a path must be a string like 'vm.*.lock', got {path!r}")
        places = targets(data, path)
        for earlier, earlier_places in reached:
            if _replaces(earlier_places, places):
                raise ScenarioError(overwrite_message("settings", earlier, path))
        reached.append((path, places))
        value = plain_value(value)
        try:
            _check_values(value, path)
        except _TooWide as e:
            try:
                probe = copy.deepcopy(data)
                _apply_setting(probe, path, e.clamped(value))
            except Exception:  # noqa: BLE001 - a probe that cannot be made leaves the generic message
                raise e from None
            raise e.told(probe) from None
        _apply_setting(data, path, value)
    for key, value in overrides.items():
        if value is not None:
            if key in (settings or {}):
                raise ScenarioError(given_twice(key, settings[key], value))
            value = plain_value(value)
            _check_values(value, key)
            data[key] = value
    return data


#: Tables and lists nested deeper than this are refused before Python's recursion limit is met.
_DEPTH = 100
_TOO_DEEP = (f"nested more than {_DEPTH} tables or lists deep, or a table that contains itself; a scenario is a few "
             "levels of tables and lists")
#: What every refusal of a whole number beyond 64 bits says.
WHOLE_NUMBER_RANGE = "no field takes a whole number outside -2^63..2^64-1"
#: The longest scenario file read: a scenario is a short TOML file, and a device such as
#: /dev/zero would otherwise be read until memory runs out.
_MAX_SCENARIO_BYTES = 16 * 2**20


def _loads(text: str) -> dict:
    """TOML text as a dict; what Python's parser cannot take (nesting past its recursion limit, a
    whole number of thousands of digits) as a ScenarioError, not a traceback. A byte-order mark,
    which some editors write, is skipped."""
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise ScenarioError(f"TOML: tables or lists nested too deep (more than {_DEPTH} levels are refused); "
                            "a scenario is a few levels of tables and lists") from None
    except ValueError:  # int() refuses strings of more than 4300 digits
        raise ScenarioError(f"TOML: a whole number of more than 4300 digits; {WHOLE_NUMBER_RANGE}") from None


def toml_value(raw: str) -> Any:
    """One value written in TOML (``16``, ``[0, 1]``), as on the command line; raises
    ``tomllib.TOMLDecodeError`` for text that is not one, and ScenarioError for what Python's
    parser cannot take."""
    return _loads(f"v = {raw}")["v"]


def _quoted_line(text: str, message: str) -> str:
    """The line a TOML error names, quoted (tomllib gives only its number)."""
    at = re.search(r"at line (\d+)", message)
    lines = text.splitlines()
    if not at or not 1 <= int(at.group(1)) <= len(lines) or not lines[int(at.group(1)) - 1].strip():
        return ""
    return f": {lines[int(at.group(1)) - 1].strip()}"


def given_twice(key: str, setting: Any, value: Any) -> str:
    """The error for a top-level key given both as a setting and as its own argument."""
    return (f"{key}: given twice, as the setting {key}={setting!r} (--set) and as the argument {value!r} "
            f"(--{key.replace('_', '-')}); give it once")


def plain_value(value: Any) -> Any:
    """numpy scalars and arrays (from ``np.arange``, a DataFrame cell), also inside lists and
    tables, as the Python values JSON takes."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_value(v) for k, v in value.items()}
    return value


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except OSError:  # a name too long to be a path
        return False


def _read_scenario_file(path: Path) -> str:
    try:
        exists = path.exists()
    except OSError as e:  # a name too long for the file system, say
        shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:60]}... ({len(str(path)):,} characters)"
        raise ScenarioError(f"scenario file {shown}: not a usable path: {e.strerror or e}") from None
    if not exists:
        raise ScenarioError(f"scenario file not found: {path}")
    if path.is_dir():
        raise ScenarioError(f"scenario {path}: is a directory, not a TOML file")
    try:
        fifo = stat.S_ISFIFO(path.stat().st_mode)
        # Opening a named pipe waits for a writer, forever if none comes: open it without
        # waiting, then read what a writer already there sends (a pipe with none reads as empty).
        fd = os.open(path, os.O_RDONLY | (os.O_NONBLOCK if fifo else 0))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(_MAX_SCENARIO_BYTES + 1)
    except OSError as e:
        raise ScenarioError(f"scenario {path}: cannot read it: {e.strerror or e}") from None
    if fifo and not raw:
        raise ScenarioError(f"scenario {path}: a named pipe that nothing writes to; give a TOML file, or write the scenario into the pipe first")
    if len(raw) > _MAX_SCENARIO_BYTES:
        raise ScenarioError(f"scenario {path}: longer than {_MAX_SCENARIO_BYTES // 2**20} MiB; a scenario is a short TOML file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"scenario {path}: not UTF-8 text (byte {e.start}); a scenario is a TOML file") from None


def shown_int(value: int) -> str:
    """A whole number as a message quotes it: in full up to 60 digits, else by its length (Python
    refuses to print one of over 4300 digits, which a hexadecimal TOML literal can give)."""
    if abs(value) < 10**60:
        return str(value)
    sign = "a negative" if value < 0 else "a"
    if value.bit_length() < 14000:  # under Python's 4300-digit limit: count them
        return f"{sign} whole number of {len(str(abs(value))):,} digits"
    return f"{sign} whole number of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"


def _shown(value: Any) -> str:
    """``repr`` for a message, with any whole number in it shown by :func:`shown_int`."""
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return shown_int(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_shown(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    try:
        return repr(value)
    except ValueError:  # a whole number too long to print, deeper inside
        return f"a {type(value).__name__}"


class _TooWide(ScenarioError):
    """A whole number beyond 64 bits at ``where`` (``keys``: the keys and indices that lead to it)."""

    def __init__(self, where: str, value: int, keys: tuple):
        super().__init__(f"{where}: {shown_int(value)} is out of range; {WHOLE_NUMBER_RANGE} (a seed is 0..={2**64 - 1})")
        self.where, self.value, self.keys = where, value, keys
        self.bound = 2**64 - 1 if value > 0 else -(2**63)

    def clamped(self, document: Any) -> Any:
        """A copy of ``document`` with the number replaced by the 64-bit bound nearest it."""
        if not self.keys:
            return self.bound
        document = copy.deepcopy(document)
        container = document
        for key in self.keys[:-1]:
            container = container[key]
        container[self.keys[-1]] = self.bound
        return document

    def told(self, probe: Any) -> ScenarioError:
        """What the core says of ``probe`` (the scenario with the number clamped) if it complains
        of this very field, with the number put back; else the generic message above."""
        try:
            _core.validate_json(_to_json(probe))
        except ValueError as e:
            path, colon, said = str(e).partition(": ")
            if colon and _same_field(path, self.where):
                # A field of floats quotes the bound as the core prints an f64: its shortest
                # digits, without an exponent (2^64 as 18446744073709552000), or, beyond 1e16,
                # with Rust's (1.8446744073709552e19).
                as_float = format(decimal.Decimal(repr(float(self.bound))), "f")
                as_exponent = repr(float(self.bound)).replace("e+", "e")
                for shown in (str(self.bound), as_float, as_exponent):
                    said = said.replace(shown, shown_int(self.value))
                return ScenarioError(f"{self.where}: {said}")
        except Exception:  # noqa: BLE001 - a probe the core cannot take leaves the generic message
            pass
        return self


#: A VM named by index or by name, in the core's paths (`vm[0].`) and in settings (`vm.0.`,
#: `vm.*.`, `vm.db.`, `vm[db.prod].`).
_VM_SELECTOR = re.compile(r"^vm(\.[^.\[]+|\[[^\]]*\])\.")


def _same_field(core_path: str, where: str) -> bool:
    """Whether the core's path names the field at ``where``: the same path, with a setting's
    `vm.0.` read as `vm[0].`; a VM chosen by name or `*` matches that field of any VM (the
    core's complaint may then be of another VM's, which states the same kind of range)."""
    where = re.sub(r"^vm\.(\d+)\.", r"vm[\1].", where)
    if core_path == where:
        return True
    selector = _VM_SELECTOR.match(where)
    return (selector is not None and not re.fullmatch(r"\[\d+\]", selector.group(1))
            and _VM_SELECTOR.sub("vm.#.", core_path) == _VM_SELECTOR.sub("vm.#.", where))


def _check_document(data: Any) -> None:
    """:func:`_check_values` over a whole scenario; a number beyond 64 bits is told what its
    field takes where the core can say it."""
    try:
        _check_values(data, "")
    except _TooWide as e:
        try:
            probe = e.clamped(data)
        except Exception:  # noqa: BLE001 - what cannot be copied is refused by _check_values later
            raise e from None
        raise e.told(probe) from None


def _check_values(value: Any, where: str, keys: tuple = ()) -> None:
    """Reject what JSON cannot carry to the core, naming where it is: TOML dates and times, NaN
    and infinities, whole numbers beyond 64 bits, and any Python object that is not a table, list,
    string, number or bool."""
    if len(keys) > _DEPTH:
        raise ScenarioError(f"{where}: {_TOO_DEEP}")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ScenarioError(f"{where or 'scenario'}: the key {key!r} is of type {type(key).__name__}; a table's keys are strings")
            _check_values(item, f"{where}.{key}" if where else str(key), (*keys, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_values(item, f"{where}[{i}]", (*keys, i))
    elif isinstance(value, int) and not isinstance(value, bool):
        # JSON would carry a larger one to the core as a float, and its error would name a float.
        if not -(2**63) <= value <= 2**64 - 1:
            raise _TooWide(where, value, keys)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ScenarioError(f"{where}: {value} is not allowed; no field takes NaN or an infinity (numbers are finite; "
                                "one too large for a double, such as 1e400, reads as an infinity)")
    elif isinstance(value, (datetime.date, datetime.time)):
        raise ScenarioError(f"{where}: {value} is a TOML date or time, which no field takes; "
                            "allowed: tables, lists, strings, numbers and booleans")
    elif not isinstance(value, (str, int, bool)) and value is not None:
        raise ScenarioError(f"{where}: {value!r} (type {type(value).__name__}) is not allowed; "
                            "allowed: tables, lists, strings, numbers and booleans")


def parse_setting(text: str) -> tuple[str, Any]:
    """Parse ``path=value`` from the command line; the value is read as TOML (``16``, ``2.5``,
    ``true``, ``[0, 1]``) or else taken as a plain string (``tas``)."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise ScenarioError(f"--set {text!r}: expected PATH=VALUE, e.g. vm.*.lock=tas")
    try:
        value = toml_value(raw)
    except ScenarioError as e:
        raise ScenarioError(f"--set {text!r}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        # A bare word is a string (`tas`); an array, table or quoted string that does not parse is
        # a typo to report, not a string to pass on.
        if raw.strip()[:1] in ("[", "{", '"', "'"):
            raise ScenarioError(f"--set {text!r}: the value is not valid TOML: {e}") from None
        value = raw
    if isinstance(value, float) and not math.isfinite(value):
        # TOML reads the bare words inf and nan as numbers.
        raise ScenarioError(f"--set {text!r}: {raw.strip()} reads as the number {value}, which no field takes; "
                            f"for the text, quote it: {path.strip()}='\"{raw.strip()}\"'")
    return path.strip(), value


#: A setting path's keys: plain between dots, or a list entry's name in brackets, dots allowed.
_PLAIN_KEY = r"[^.[\]]+"
_NAME = r"[^][]+"
_NAME_KEY = rf"\[{_NAME}\]"


def _keys(path: str) -> list[str]:
    """A setting path's keys, a bracketed name as one key (`vm[db.prod].lock`: vm, db.prod, lock)."""
    return [bracketed or plain for bracketed, plain in re.findall(rf"\[({_NAME})\]|({_PLAIN_KEY})", path)]


def _entries(t: list, key: str) -> list[int]:
    """The entries of a list that a key names: `*` all, an index if there is one, else by name."""
    if key == "*":
        return list(range(len(t)))
    if re.fullmatch(r"0|[1-9][0-9]*", key) and int(key) < len(t):
        return [int(key)]
    return [i for i, e in enumerate(t) if isinstance(e, dict) and e.get("name") == key]


def targets(data: Any, path: str) -> list[tuple]:
    """The places in ``data`` that setting ``path`` writes, as key tuples with each list entry
    named by its index: ``vm.web.lock``, ``vm[1].lock`` and ``vm.*.lock`` all reach ``("vm", 1,
    "lock")`` when ``web`` is the second VM. A path that does not resolve reaches nothing here;
    applying it reports why."""
    found = [((), data)]
    for key in _keys(path):
        following = []
        for at, t in found:
            if isinstance(t, list):
                following += [((*at, i), t[i]) for i in _entries(t, key)]
            else:
                following.append(((*at, key), t.get(key) if isinstance(t, dict) else None))
        found = following
    return [at for at, _ in found]


def _replaces(first: list[tuple], later: list[tuple]) -> bool:
    """Whether writing the places ``later`` after ``first`` replaces a value ``first`` wrote: a
    later place equal to or above an earlier one. A deeper place refines (a table, then a key of it)."""
    return any(len(b) <= len(a) and a[: len(b)] == b for a in first for b in later)


def overwrites(data: Any, first: str, later: str) -> bool:
    """Whether setting ``later`` after ``first`` would replace what ``first`` set in ``data``."""
    return _replaces(targets(data, first), targets(data, later))


def overwrite_message(what: str, first: str, later: str) -> str:
    return (f"{what} {first} and {later}: {later} would overwrite what {first} sets (the same setting, "
            f"by index, name or *, or a table after a key inside it): give it once, or the table first")


def _apply_setting(node: Any, path: str, value: Any) -> None:
    # `vm[0].vcpus`, the notation of the error messages, means `vm.0.vcpus`. A list entry is named
    # by its index, by `*` (every entry), or by its `name` (`vm.db.lock`); an index comes first,
    # so a VM named "1" is reached as `vm.1` only if it is the second.
    # A name in brackets may hold dots (`vm[db.prod].lock`); elsewhere a dot separates keys.
    if not re.fullmatch(rf"(?:{_PLAIN_KEY}|{_NAME_KEY})(?:\.{_PLAIN_KEY}|{_NAME_KEY})*", path):
        raise ScenarioError(f"setting {path!r}: not a path; expected keys joined by dots, with a list entry "
                            "named by its index, * or its name (vm.0.lock, vm.*.lock, vm.db.lock, vm[db.prod].lock)")
    keys = _keys(path)
    nodes = [node]
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        where = ".".join(keys[: depth + 1])
        following = []
        for t in nodes:
            if isinstance(t, list):
                names = [e.get("name") for e in t if isinstance(e, dict) and isinstance(e.get("name"), str)]
                items = _entries(t, key)
                if not items and key != "*":
                    shown = [f"[{n}]" if "." in n else n for n in names]  # a dotted name only in brackets
                    by_name = f", or a name: {', '.join(shown)}" if names else ""
                    raise ScenarioError(f"setting {path}: {where} does not exist; the list has {len(t)} "
                                        f"{'entry' if len(t) == 1 else 'entries'} "
                                        f"(use 0..{len(t) - 1} or *{by_name})")
                for i in items:
                    if last:
                        t[i] = copy.deepcopy(value)  # each target its own: a later setting may refine one
                    else:
                        following.append(t[i])
            elif isinstance(t, dict):
                if last:
                    t[key] = copy.deepcopy(value)
                else:
                    following.append(t.setdefault(key, {}))
            else:
                raise ScenarioError(f"setting {path}: {'.'.join(keys[:depth])} is a value, not a table")
        nodes = following


def _check_timeline(timeline: Any, data: dict) -> None:
    try:
        if isinstance(timeline, (set, frozenset, dict, str, bytes)):  # no order, or not two numbers
            raise TypeError
        times = list(timeline)
        # Numbers only, as scenario fields take them: float() would read "0.3" and True too.
        if any(isinstance(t, (str, bytes, bool)) for t in times):
            raise TypeError
        start, end = (float(t) for t in times)
    except (TypeError, ValueError, OverflowError):
        raise ScenarioError(f"timeline: expected (from_ms, to_ms), e.g. (0, 50), got {_shown(timeline)}") from None
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise ScenarioError(f"timeline: expected finite times with 0 <= from_ms < to_ms, got ({start:g}, {end:g})")
    if int(end * 1e6) - int(start * 1e6) < 1:
        # The simulator keeps whole nanoseconds: a shorter window would record nothing.
        raise ScenarioError(f"timeline: the window ({start:g}, {end:g}) ms is shorter than 1 ns, the simulator's resolution")
    duration = data.get("duration_ms")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and start >= duration:
        raise ScenarioError(f"timeline: the window starts at {start:g} ms, at or after the run's end (duration_ms = {duration:g})")


def _to_json(data: dict) -> str:
    return json.dumps(data, sort_keys=True)


def core_error(e: ValueError, data: dict) -> ScenarioError:
    """The core's complaint about ``data`` as a ScenarioError. The core names a VM by its index
    (`vm[1].lock`), where the user may have named it (`--set vm.db.lock=...`): say which it is."""
    message = str(e)
    m = re.match(r"vm\[(\d+)\]", message)
    vms = data.get("vm")
    if m and isinstance(vms, list) and int(m.group(1)) < len(vms):
        vm = vms[int(m.group(1))]
        name = vm.get("name") if isinstance(vm, dict) else None
        # A blank name names nothing (and is then what the core complains of).
        if isinstance(name, str) and name.strip():
            message += f" (vm[{m.group(1)}] is the VM named {json.dumps(name)})"
    return ScenarioError(message)


def validate(scenario: Scenario, settings: dict[str, Any] | None = None, **overrides: Any) -> dict:
    """Check a scenario without running it; returns it as a dict or raises ScenarioError."""
    data = load_scenario(scenario, settings, **overrides)
    try:
        _core.validate_json(_to_json(data))
    except ValueError as e:
        raise core_error(e, data) from None
    return data


def run(scenario: Scenario, settings: dict[str, Any] | None = None,
        timeline: tuple[float, float] | None = None, **overrides: Any) -> Result:
    """Simulate a scenario. Raises ScenarioError for bad input and InvariantError (a
    RuntimeError) if the run broke an invariant (mutual exclusion, FIFO hand-off, lost wake-up).

    ``timeline=(from_ms, to_ms)`` also records what every vCPU did in that window, as Chrome
    trace JSON in ``Result.timeline`` (open it in https://ui.perfetto.dev or chrome://tracing).
    """
    data = load_scenario(scenario, settings, **overrides)
    if timeline is not None:
        _check_timeline(timeline, data)
    trace = None
    try:
        if timeline is None:
            raw = _core.run_json(_to_json(data))
        else:
            raw, trace = _core.run_json_with_timeline(_to_json(data), float(timeline[0]), float(timeline[1]))
    except ValueError as e:
        raise core_error(e, data) from None
    return Result(json.loads(raw), data, trace)
