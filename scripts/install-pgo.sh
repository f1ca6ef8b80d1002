#!/usr/bin/env bash
# Install vspin into the current Python environment built with profile-guided optimization:
# about 6% more simulated lock acquisitions per second on `vspin bench` (docs/performance.md,
# "Profile-guided build"). Results are the same bytes as the plain build's: PGO changes code
# layout and inlining, not arithmetic.
#
# Not the default install, because it compiles vspin twice and needs `llvm-profdata` of the same
# LLVM as rustc (rustup's llvm-tools component). Usage, from the repository root:
#
#   python3 -m pip install .        # the plain build and its dependencies
#   bash scripts/install-pgo.sh     # rebuild with a profile of the examples and the bench scenario
#
# PYTHON (default: python3) names the interpreter whose environment gets the build.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    echo "install-pgo: $profdata not found; install it with: rustup component add llvm-tools" >&2
    exit 2
fi
if ! "$python" -c "import vspin" 2>/dev/null; then
    echo "install-pgo: vspin is not installed for $python; run: $python -m pip install . first" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== instrumented build"
RUSTFLAGS="-Cprofile-generate=$work/raw" "$python" -m pip install --quiet --force-reinstall --no-deps .

echo "== training: the bench scenario and every example"
"$python" -m vspin.cli bench --repeat 1 > /dev/null
for scenario in examples/*.toml; do
    "$python" -m vspin.cli run "$scenario" > /dev/null
done
"$profdata" merge -o "$work/vspin.profdata" "$work/raw"

echo "== optimized build"
RUSTFLAGS="-Cprofile-use=$work/vspin.profdata" "$python" -m pip install --quiet --force-reinstall --no-deps .
"$python" -m vspin.cli bench --repeat 3
