"""The CPU-quota cgroup of `bench-locks --cpu-max`, on fake cgroup trees (v1 and v2): what is
written where, that the process goes home after the body, and clear errors."""

import os
from pathlib import Path

import pytest

from vspin.cgroup import CgroupError, cpu_quota, parse_cpu_max


def fake_tree(root: Path, version: int) -> Path:
    """A /proc/self and a cgroup mount as the kernel shows them; returns the mount's directory."""
    (root / "proc/self").mkdir(parents=True)
    if version == 1:
        mount = root / "sys/fs/cgroup/cpu"
        (root / "proc/self/mounts").write_text("cgroup /sys/fs/cgroup/cpu cgroup rw,nosuid,cpu 0 0\n")
        (root / "proc/self/cgroup").write_text("2:memory:/x\n1:cpu:/\n0::/\n")
    else:
        mount = root / "sys/fs/cgroup"
        (root / "proc/self/mounts").write_text("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n")
        (root / "proc/self/cgroup").write_text("0::/\n")
    mount.mkdir(parents=True)
    (mount / "cgroup.procs").write_text("")
    if version == 2:
        (mount / "cgroup.controllers").write_text("cpuset cpu io memory\n")
        (mount / "cgroup.subtree_control").write_text("memory\n")
    return mount


def fill_group(group: Path, version: int) -> None:
    """What the kernel creates in a new group (a fake directory has no files)."""
    stat = ("nr_periods 12\nnr_throttled 5\nthrottled_usec 250000\n" if version == 2
            else "nr_periods 12\nnr_throttled 5\nthrottled_time 250000000\n")
    (group / "cpu.stat").write_text(stat)


@pytest.mark.parametrize("version", [1, 2])
def test_the_quota_is_set_the_process_moved_in_and_back_and_the_group_removed(tmp_path, version, monkeypatch):
    mount = fake_tree(tmp_path, version)
    group = mount / f"vspin-quota-{os.getpid()}"
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        real_mkdir(self, *args, **kwargs)
        if self == group:
            fill_group(self, version)

    def rmdir(self):
        # The kernel removes a group with its control files; a fake one must be emptied first.
        for f in self.iterdir():
            f.unlink()
        os.rmdir(self)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(Path, "rmdir", rmdir)
    with cpu_quota(50_000, 100_000, root=tmp_path) as stats:
        assert (group / "cgroup.procs").read_text() == f"{os.getpid()}\n"
        if version == 2:
            assert (group / "cpu.max").read_text() == "50000 100000\n"
            assert "cpu" in (mount / "cgroup.subtree_control").read_text()
        else:
            assert (group / "cpu.cfs_quota_us").read_text() == "50000\n"
            assert (group / "cpu.cfs_period_us").read_text() == "100000\n"
    assert stats == {"cgroup_version": version, "nr_periods": 12, "nr_throttled": 5, "throttled_usec": 250_000}
    assert (mount / "cgroup.procs").read_text() == f"{os.getpid()}\n"
    assert not group.exists()


@pytest.mark.parametrize("version", [1, 2])
def test_a_group_left_by_an_interrupted_run_is_removed_by_the_next(tmp_path, version):
    mount = fake_tree(tmp_path, version)
    gone = mount / "vspin-quota-4194305"  # above any pid_max: no such process
    alive = mount / f"vspin-quota-{os.getppid()}"
    gone.mkdir()
    alive.mkdir()
    try:
        with cpu_quota(50_000, 100_000, root=tmp_path):
            pass
    except OSError:
        pass  # the fake group has no control files to fill; only the clean-up matters here
    assert not gone.exists() and alive.exists()


def test_no_cpu_controller_is_a_clear_error(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mounts").write_text("proc /proc proc rw 0 0\n")
    with pytest.raises(CgroupError, match="no cgroup hierarchy with the cpu controller"):
        with cpu_quota(50_000, 100_000, root=tmp_path):
            pass


def test_a_group_that_cannot_be_made_is_a_clear_error(tmp_path):
    mount = fake_tree(tmp_path, 1)
    os.chmod(mount, 0o500)
    try:
        if os.access(mount, os.W_OK):
            pytest.skip("running as a user that may write anywhere")
        with pytest.raises(CgroupError, match="cannot create the cgroup .*needs root or a delegated cgroup"):
            with cpu_quota(50_000, 100_000, root=tmp_path):
                pass
    finally:
        os.chmod(mount, 0o700)


def test_cpu_max_reads_a_quota_and_an_optional_period():
    assert parse_cpu_max("100000") == (100_000, 100_000)
    assert parse_cpu_max("150000/50000") == (150_000, 50_000)
    for bad, message in (("one", "not QUOTA_US"), ("500", "below the kernel's least"), ("100000/5000000", "period")):
        with pytest.raises(ValueError, match=message):
            parse_cpu_max(bad)
