#!/usr/bin/env bash
# The whole test suite: Rust (unit, property, integration, doc tests), the loom models of the
# locks on real threads, then Python (API, CLI, reproductions at quick scale).
# Installs what it needs into .venv; needs python3 >= 3.11 and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."

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
