#!/usr/bin/env bash
# The project's whole test suite: every crate with every feature (unit,
# integration, property and real-database tests, doc tests), then the loom
# models of the lock-free parts.
#
# Real-database tests read DATABASE_URL (PostgreSQL) and MYSQL_URL (MariaDB).
# Unset, they print why and skip; with CI set, a missing URL fails them.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace --all-features

# Loom swaps std's atomics and mutexes for its model checker's; it needs its
# own build (different cfg), kept apart so the main build stays cached.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test -p pool-core --no-default-features --lib --release -- loom
