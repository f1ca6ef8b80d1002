"""`scripts/install-pgo.sh` refuses, with the step to take, what it cannot do: a compiler without
`llvm-profdata`, or an interpreter without vspin. (The build itself takes minutes and is measured
in docs/performance.md, "Profile-guided build".)"""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "install-pgo.sh"


def fake_rustc(tmp_path: Path, sysroot: Path) -> dict:
    """A PATH whose `rustc` reports `sysroot` and an x86-64 Linux host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rustc = bin_dir / "rustc"
    rustc.write_text(f"#!/bin/sh\n[ \"$1\" = -vV ] && echo 'host: x86_64-unknown-linux-gnu' || echo {sysroot}\n")
    rustc.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def run(env: dict, python: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT)], env={**env, "PYTHON": python}, capture_output=True, text=True)


def test_a_compiler_without_llvm_profdata_is_told_which_component_to_add(tmp_path):
    done = run(fake_rustc(tmp_path, tmp_path / "sysroot"), sys.executable)
    assert done.returncode == 2
    assert "llvm-profdata not found; install it with: rustup component add llvm-tools" in done.stderr


def test_an_interpreter_without_vspin_is_told_to_install_it_first(tmp_path):
    tools = tmp_path / "sysroot" / "lib" / "rustlib" / "x86_64-unknown-linux-gnu" / "bin"
    tools.mkdir(parents=True)
    (tools / "llvm-profdata").write_text("#!/bin/sh\n")
    (tools / "llvm-profdata").chmod(0o755)
    done = run(fake_rustc(tmp_path, tmp_path / "sysroot"), "/bin/false")
    assert done.returncode == 2
    assert "vspin is not installed for /bin/false; run: /bin/false -m pip install . first" in done.stderr
