#!/usr/bin/env bash
# Checks that the public API of the library crates (pool-api, pool-core and
# the driver crates under integrations/) is the one checked
# in (public-api.txt in each crate), so that a change to it is a deliberate
# diff in review. Prints each crate's count of public items and methods.
#
#   scripts/api_check.sh           # check; fails with the diff on a change
#   scripts/api_check.sh --bless   # write the listings anew
#
# The docs are checked on the way: rustdoc runs with warnings denied
# (broken and private links, bad HTML), over every member of the workspace,
# hidden items included, so this is also the test command's doc check.
#
# The listing comes from rustdoc's JSON output, hidden items included
# (scripts/public_api.py says what is listed and counted), with the feature
# set the test command builds with (scripts/workspace_features.sh: every
# feature of the library crates). That output format is unstable: the
# stable rustdoc writes it only with RUSTC_BOOTSTRAP=1, which this script
# gives to rustdoc alone, through a wrapper, so the dependencies keep the
# metadata the clippy and rustdoc steps checked (given to cargo, it would
# check them all again). The format is pinned, not the toolchain:
# public_api.py refuses a format other than the one it was written for,
# naming both. The JSON lands beside the HTML docs (target/doc/*.json).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "api_check.sh: FAILED: $*" >&2
  exit 1
}

bless=false
if [[ "${1:-}" == "--bless" ]]; then bless=true; fi

target_dir=${CARGO_TARGET_DIR:-target}
mkdir -p "$target_dir"
wrapper=$(cd "$target_dir" && pwd)/rustdoc-json
rustdoc=$(rustup which rustdoc 2>/dev/null || command -v rustdoc) || fail "no rustdoc"
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec %q "$@"\n' "$rustdoc" >"$wrapper"
chmod +x "$wrapper"
echo "api_check.sh: $("$rustdoc" --version)"

crates=(pool-api pool-core pool-ambient pool-postgres pool-sqlx)
for crate in "${crates[@]}"; do rm -f "$target_dir/doc/${crate//-/_}.json"; done
# Every member is documented, not only the five (binaries too): selecting
# fewer packages would resolve the dependencies' features anew and check
# them again.
RUSTDOC=$wrapper RUSTDOCFLAGS="-D warnings -Z unstable-options --output-format json --document-hidden-items" \
  cargo doc --quiet --workspace --no-deps --features "$(scripts/workspace_features.sh)" ||
  fail "rustdoc could not document the workspace, or warned (above)"

changed=()
for crate in "${crates[@]}"; do
  case $crate in pool-api | pool-core) home=$crate ;; *) home=integrations/$crate ;; esac
  json="$target_dir/doc/${crate//-/_}.json"
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
