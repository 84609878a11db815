#!/usr/bin/env bash
# The project's checks, all of them, every time (the README's test command;
# .ci/run runs it with DATABASE_URL, MYSQL_URL and CI=true exported):
#
#   1. cargo fmt --check
#   2. clippy on every target with every feature, warnings denied
#   3. tests, paused-clock pass: the whole workspace with every feature, so
#      pool-core's `tokio-clock` is on and the tests that drive time with
#      `start_paused` can (they fail to compile without it, on purpose)
#   4. tests, production-clock pass: pool-core without `tokio-clock`, so the
#      CPU-counter clock (quanta) is compiled and exercised: its unit tests
#      and the integration tests that run on real time under load
#   5. the loom models of the lock-free parts
#   6. Miri over the unsafe unit tests (scripts/miri.sh)
#
# Build cost (CI has 2 cores and 30 minutes): pass 3 builds everything once.
# Pass 4 selects only pool-core with its default features, so sqlx (0.9 and
# 0.8) is not built again with other features, nor at all: only pool-core,
# its unit tests and a handful of test binaries are compiled a second time.
# Loom and Miri build in their own target dirs so they never invalidate the
# main build.
#
# Real-database tests are #[ignore]d with their reason. With DATABASE_URL
# (PostgreSQL) and MYSQL_URL (MariaDB) both set they run
# (--include-ignored); without them the summary lists them as ignored, after
# a loud line saying so. Under CI a missing URL fails at once: CI never
# skips the database suites.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() {
  echo
  echo "==> [$((SECONDS - started))s] $*"
}

in_ci=false
if [[ -n "${CI:-}" && "${CI}" != "false" && "${CI}" != "0" ]]; then in_ci=true; fi

ignored_args=()
if [[ -n "${DATABASE_URL:-}" && -n "${MYSQL_URL:-}" ]]; then
  ignored_args=(--include-ignored)
elif $in_ci; then
  echo "test.sh: FAILED: CI is set but DATABASE_URL and/or MYSQL_URL are not;" \
    "CI must run the real-database suites" >&2
  exit 1
else
  echo "####################################################################"
  echo "## DATABASE SUITES SKIPPED: DATABASE_URL and MYSQL_URL are not both"
  echo "## set; the tests that need PostgreSQL or MariaDB show as ignored."
  echo "## e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test"
  echo "##      MYSQL_URL=mysql://root@127.0.0.1:3306/test"
  echo "####################################################################"
fi

step "rustfmt"
cargo fmt --all --check

step "clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "tests, paused clock (every crate, every feature)"
cargo test --workspace --all-features -- "${ignored_args[@]}"

step "tests, production clock (pool-core without tokio-clock)"
# The engine's tests that run on real time (no `start_paused`); the
# modules on the paused clock are left out of this build.
cargo test -p pool-core --lib --test engine

step "stress, release build (pool-core without tokio-clock)"
# Everything at once for a bounded time (tests/engine/stress.rs): far more
# interleavings fit in an optimised build.
cargo test -p pool-core --release --test engine -- stress

step "loom models"
# Loom swaps std's atomics and mutexes for its model checker's; it needs its
# own build (different cfg), kept apart so the main build stays cached.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test -p pool-core --no-default-features --lib --release -- loom

step "Miri"
scripts/miri.sh

step "all checks passed in $((SECONDS - started))s"
# The build's footprint, so a change that grows it shows up in the log.
echo "test.sh: target dir: $(du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null | cut -f1)"
if ((${#ignored_args[@]} == 0)); then
  echo "test.sh: NOTE: the real-database suites were skipped (see the ignored counts above)"
fi
