#!/usr/bin/env bash
# Checks that the public API of the library crates (pool-api, pool-core and
# the driver crates under integrations/) is the one checked
# in (public-api.txt in each crate), so that a change to it is a deliberate
# diff in review. Prints each crate's count of public items and methods.
#
#   scripts/api_check.sh           # check; fails with the diff on a change
#   scripts/api_check.sh --bless   # write the listings anew
#
# The listing comes from rustdoc's JSON output with every feature on and
# hidden items included (scripts/public_api.py says what is listed and
# counted). That output needs the nightly toolchain; one that is missing
# is installed (said loudly), and a failure to install fails this script.
# The JSON format is pinned, not the nightly: public_api.py refuses a
# format other than the one it was written for, naming both.
# It builds in its own target dir (API_TARGET_DIR, default api/ under
# CARGO_TARGET_DIR, else target/api), so it never invalidates the main
# build.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "api_check.sh: FAILED: $*" >&2
  exit 1
}

bless=false
if [[ "${1:-}" == "--bless" ]]; then bless=true; fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "################################################################" >&2
  echo "api_check.sh: no nightly toolchain: installing it now" >&2
  echo "################################################################" >&2
  rustup toolchain install nightly --profile minimal ||
    fail "could not install the nightly toolchain"
fi

echo "api_check.sh: $(rustup run nightly rustc --version)"
export CARGO_TARGET_DIR="${API_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/api}"
changed=()
for crate in pool-api pool-core pool-ambient pool-postgres pool-sqlx; do
  case $crate in pool-api | pool-core) home=$crate ;; *) home=integrations/$crate ;; esac
  json="$CARGO_TARGET_DIR/doc/${crate//-/_}.json"
  rm -f "$json"
  cargo +nightly rustdoc -q -p "$crate" --all-features -- \
    -Z unstable-options --output-format json --document-hidden-items ||
    fail "rustdoc could not document $crate"
  listing=$(python3 scripts/public_api.py "$json") ||
    fail "could not read rustdoc's JSON for $crate (a new format version?)"
  echo "api_check.sh: $crate: $(python3 scripts/public_api.py --count "$json")"
  if $bless; then
    printf '%s\n' "$listing" >"$home/public-api.txt"
  elif ! diff -u "$home/public-api.txt" <(printf '%s\n' "$listing"); then
    changed+=("$crate")
  fi
done
if ((${#changed[@]})); then
  fail "the public API of ${changed[*]} changed (diff above); if on purpose, run scripts/api_check.sh --bless and commit the listings"
fi
