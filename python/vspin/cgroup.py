"""A CPU quota for this process: the real-thread counterpart of a scenario's ``vm.cpu_max``.

``vspin bench-locks --cpu-max`` runs the benchmark's threads the way a container with a CPU limit
runs (``docker --cpus``, a Kubernetes limit): in a cgroup whose CPU time per period is capped, so
that the kernel's CFS bandwidth control throttles them when the group has spent its quota. The
group is made for the run and removed after it; the process goes back to the cgroup it came from.

Both cgroup versions are handled: v2 (``cpu.max``, "quota period", in the unified hierarchy) and
v1 (``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` in the ``cpu`` controller's hierarchy). Either
needs permission to create a group and move this process into it (root, or a delegated
subtree); without it the error says what was tried.

Ctrl-C ends the `vspin` command at once (the default SIGINT action: a Rust run never returns to
Python to take an exception), so an interrupted run cannot remove its group. The group is empty
once the process is gone, and the next run removes every ``vspin-quota-PID`` group whose process
no longer exists before it makes its own.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

#: The kernel's bounds on a period and the least quota (``tg_set_cfs_bandwidth``), the same as
#: a scenario's ``cpu_max`` accepts.
PERIOD_US = (1_000, 1_000_000)
MIN_QUOTA_US = 1_000


class CgroupError(RuntimeError):
    """No CPU-quota cgroup could be made or used; the message says what failed."""


def parse_cpu_max(text: str) -> tuple[int, int]:
    """``QUOTA_US`` or ``QUOTA_US/PERIOD_US`` (the period defaults to 100000, the kernel's)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:/\s*(\d+)\s*)?", text)
    if m is None:
        raise ValueError(f"--cpu-max: {text!r} is not QUOTA_US or QUOTA_US/PERIOD_US (e.g. 100000/100000 for one CPU)")
    quota, period = int(m.group(1)), int(m.group(2) or 100_000)
    if not PERIOD_US[0] <= period <= PERIOD_US[1]:
        raise ValueError(f"--cpu-max: period {period} µs is out of range; allowed {PERIOD_US[0]}..={PERIOD_US[1]}")
    if quota < MIN_QUOTA_US:
        raise ValueError(f"--cpu-max: quota {quota} µs is below the kernel's least, {MIN_QUOTA_US}")
    return quota, period


def _mounts(mounts_file: Path) -> list[tuple[str, str, list[str]]]:
    """(mount point, filesystem type, options) of every cgroup mount."""
    found = []
    for line in mounts_file.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            found.append((fields[1], fields[2], fields[3].split(",")))
    return found


def _own_group(proc_cgroup: Path, controller: str) -> str:
    """This process's group path in the hierarchy of ``controller`` (v1), or in the unified one
    (v2), whose lines in ``/proc/self/cgroup`` name no controller: ``controller=""``."""
    for line in proc_cgroup.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise CgroupError(f"cannot write {text.strip()!r} to {path}: {e.strerror or e}") from None


@contextmanager
def cpu_quota(quota_us: int, period_us: int, root: Path = Path("/")) -> Iterator[dict]:
    """Run the body with this process in a new cgroup limited to ``quota_us`` of CPU time per
    ``period_us``. Yields a dict that, after the body, holds the group's throttling statistics
    (``nr_periods``, ``nr_throttled``, ``throttled_usec``) and the cgroup version used. ``root``
    stands for ``/`` (tests give a fake tree)."""
    mounts = _mounts(root / "proc/self/mounts")
    v2 = [m for m in mounts if m[1] == "cgroup2" and "cpu" in _controllers(root, m[0])]
    v1 = [m for m in mounts if m[1] == "cgroup" and "cpu" in m[2]]
    if v1:
        base, version = root / v1[0][0].lstrip("/"), 1
        own = _own_group(root / "proc/self/cgroup", "cpu")
    elif v2:
        base, version = root / v2[0][0].lstrip("/"), 2
        own = _own_group(root / "proc/self/cgroup", "")
    else:
        raise CgroupError("no cgroup hierarchy with the cpu controller is mounted (looked in /proc/self/mounts for "
                          "cgroup2 with cpu in cgroup.controllers, or a cgroup v1 cpu mount)")
    _remove_groups_of_gone_processes(base)
    group = base / f"vspin-quota-{os.getpid()}"
    home = base / own.lstrip("/")
    try:
        group.mkdir()
    except OSError as e:
        raise CgroupError(f"cannot create the cgroup {group}: {e.strerror or e} (--cpu-max needs root or a "
                          f"delegated cgroup)") from None
    stats: dict = {"cgroup_version": version}
    moved = False
    try:
        if version == 2:
            _enable_cpu_controller(base)
            _write(group / "cpu.max", f"{quota_us} {period_us}\n")
        else:
            _write(group / "cpu.cfs_period_us", f"{period_us}\n")
            _write(group / "cpu.cfs_quota_us", f"{quota_us}\n")
        _write(group / "cgroup.procs", f"{os.getpid()}\n")
        moved = True
        yield stats
        stats.update(_throttling(group / "cpu.stat", version))
    finally:
        if moved:
            _write(home / "cgroup.procs", f"{os.getpid()}\n")
        group.rmdir()


def _remove_groups_of_gone_processes(base: Path) -> None:
    """Remove the groups that interrupted runs left (see the module docs). One still in use, or
    that cannot be removed, is left alone."""
    for group in base.glob("vspin-quota-*"):
        pid = group.name.removeprefix("vspin-quota-")
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its process still runs
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        try:
            group.rmdir()
        except OSError:
            pass


def _controllers(root: Path, mount_point: str) -> list[str]:
    try:
        return (root / mount_point.lstrip("/") / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def _enable_cpu_controller(base: Path) -> None:
    """A v2 group gets the cpu controller only if its parent delegates it."""
    control = base / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        _write(control, "+cpu\n")


def _throttling(stat_file: Path, version: int) -> dict:
    """The group's ``cpu.stat``: periods, throttled periods and throttled time (µs)."""
    values = dict(line.split() for line in stat_file.read_text().splitlines() if len(line.split()) == 2)
    throttled_usec = int(values.get("throttled_usec", 0)) if version == 2 else int(values.get("throttled_time", 0)) // 1000
    return {"nr_periods": int(values.get("nr_periods", 0)), "nr_throttled": int(values.get("nr_throttled", 0)),
            "throttled_usec": throttled_usec}
