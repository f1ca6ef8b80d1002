#!/usr/bin/env bash
# The whole test suite: Rust (unit, property, integration, doc tests), the loom models of the
# locks on real threads, then Python (API, CLI, reproductions at quick scale).
# Installs what it needs into .venv; needs python3 >= 3.11 and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."

# A one-off run gains nothing from incremental caches, which are a third of the test build's size.
export CARGO_INCREMENTAL=0

# The builds and the virtual environment take about 1.3 GB here (target/ and .venv/); a full disk
# otherwise shows up as a compiler crash halfway through.
# Only a warning: a df that fails or prints something else says nothing.
free_mb=$(df -Pm . 2>/dev/null | awk 'NR == 2 { print $4 }') || free_mb=
if [[ "$free_mb" =~ ^[0-9]+$ ]] && [ "$free_mb" -lt 1500 ]; then
    echo "scripts/test.sh: warning: only ${free_mb} MB free here; the build and the tests need about 1,300 MB" >&2
fi

echo "== Rust tests"
cargo test --workspace --locked

echo "== loom models (every lock on the native platform)"
bash scripts/loom.sh

echo "== Python package (build + install into .venv)"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip==24.3.1
.venv/bin/python -m pip install --quiet '.[test]'

echo "== Python tests"
.venv/bin/python -m pytest -q
