#!/usr/bin/env bash
# Runs the unit tests of the lock-free parts (the index stack, the slots,
# the waiter list), and the pool's reference-count tests, under Miri, which
# checks every unsafe access for undefined behaviour (aliasing, data races,
# use after free, leaks).
#
# Needs the nightly toolchain with the `miri` and `rust-src` components; a
# missing component is installed (said loudly), and a failure to install
# fails this script. Miri builds in its own target dir (MIRI_TARGET_DIR,
# default miri/ under CARGO_TARGET_DIR, else target/miri) so it never
# invalidates the main build.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "miri.sh: FAILED: $*" >&2
  exit 1
}

installed=$(rustup component list --toolchain nightly --installed 2>/dev/null) ||
  fail "no nightly toolchain; install it with: rustup toolchain install nightly --component miri rust-src"
missing=()
for component in miri rust-src; do
  grep -q "^${component}\b" <<<"$installed" || missing+=("$component")
done
if ((${#missing[@]})); then
  echo "################################################################" >&2
  echo "miri.sh: nightly lacks ${missing[*]}: installing them now" >&2
  echo "################################################################" >&2
  rustup component add --toolchain nightly miri rust-src ||
    fail "could not install ${missing[*]} on the nightly toolchain"
fi

export CARGO_TARGET_DIR="${MIRI_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/miri}"
cargo +nightly miri setup >/dev/null 2>&1 || fail "cargo miri setup did not succeed (run it by hand to see why)"

# The unit tests Miri runs, as test-name filters (module paths; the waiter
# list's tests live in linked_list). The engine
# may rename modules: keep this list on this one line when updating it.
MIRI_FILTER=(index_stack slots linked_list waiters)

cargo +nightly miri test -p pool-core --no-default-features --lib -- "${MIRI_FILTER[@]}" ||
  fail "Miri found a problem (or a test failed) in: ${MIRI_FILTER[*]}"

# The pool's reference count against parked connections (`count_tests`,
# `slots/parked.rs`, "The pool's reference"): a real pool on a current-thread
# runtime, so that Miri checks the count passed from a guard to a slot and
# back, and released from a pointer to the whole `Arc` allocation. Tokio's
# clock (the CPU counter is not emulated) and host time (tokio reads it).
# The multi-threaded soak test is left to the native passes: under Miri it
# takes minutes.
MIRI_COUNT_FILTER=(count_tests::a_ count_tests::claims count_tests::close count_tests::without)
MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-disable-isolation" \
  cargo +nightly miri test -p pool-core --no-default-features --features tokio-clock --lib -- \
  "${MIRI_COUNT_FILTER[@]}" ||
  fail "Miri found a problem (or a test failed) in: ${MIRI_COUNT_FILTER[*]}"
