#!/usr/bin/env bash
# Model-check every lock algorithm on the native platform with loom (crates/vspin-locks/tests/loom.rs).
# Each model picks its preemption bound (2, or 1 for three threads with unbounded spins);
# LOOM_MAX_PREEMPTIONS=N overrides it for all (3 explores more, much slower).
# Extra arguments go to the test harness, e.g. `scripts/loom.sh pv_ticket`.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg vspin_loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}" \
    cargo test --locked -p vspin-locks --test loom --release -- "$@"
