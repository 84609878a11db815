#!/usr/bin/env bash
# Checks that every version requirement our manifests declare is a floor
# that builds: the workspace's direct dependencies are resolved to the
# lowest versions their requirements allow (nightly Cargo's
# `-Z direct-minimal-versions`; the dependencies of those dependencies
# resolve as usual), then the library crates (pool-api, pool-core and the driver crates) are
# built with every feature and their unit tests run. A requirement such as
# `tokio-postgres = "0.7"` while the code calls a method that 0.7.17 added
# fails here, instead of inside a user's build whose lock holds an older
# release.
#
# Resolution covers the whole workspace (the examples and the benches
# too), so their requirements must resolve at their floors as well; only
# the two library crates are built, which keeps the cost in CI to one more
# build of their dependencies.
#
# The real Cargo.lock is never touched: the workspace's files (those git
# tracks, and new ones it does not ignore) are copied under the check's own
# target dir (MIN_VERSIONS_TARGET_DIR, default minimal/ under
# CARGO_TARGET_DIR, else target/minimal), the lowest versions are resolved
# into the copy's lock, and the build runs there with the default toolchain
# (stable reads a lock that nightly wrote). Needs the nightly toolchain for
# the resolution only: it is installed with rustup if missing (said
# loudly), and a failure to install fails this script.
#
#   scripts/min_versions.sh            # resolve, build, run the unit tests
#   scripts/min_versions.sh --no-run   # resolve and build only (the test
#                                      # command builds beside its other
#                                      # tests, and runs these on their own)
set -euo pipefail
cd "$(dirname "$0")/.."

run=()
case "${1:-}" in
  "") ;;
  --no-run) run=(--no-run) ;;
  *) echo "min_versions.sh: unknown argument: $1 (the one known is --no-run)" >&2; exit 2 ;;
esac

fail() {
  echo "min_versions.sh: FAILED: $*" >&2
  exit 1
}

command -v rustup >/dev/null || fail "no rustup: the nightly toolchain is needed to resolve the lowest versions"
if ! rustup run nightly cargo --version >/dev/null 2>&1; then
  echo "################################################################" >&2
  echo "min_versions.sh: no nightly toolchain: installing it now" >&2
  echo "################################################################" >&2
  rustup toolchain install nightly --profile minimal ||
    fail "could not install the nightly toolchain; install it with: rustup toolchain install nightly --profile minimal"
fi

dir=${MIN_VERSIONS_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/minimal}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
copy=$dir/workspace

# The copy: files keep their times, so a second run over unchanged sources
# rebuilds nothing.
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "not a git checkout: the files to copy are the ones git lists"
rm -rf "$copy"
mkdir -p "$copy"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' file; do
    # A tracked file deleted in the work tree is left out, as in a build,
    # and so is this check's own dir (a target dir git does not ignore).
    if [[ -e $file && $PWD/$file != "$dir"/* ]]; then printf '%s\0' "$file"; fi
  done |
  xargs -0 cp --parents --preserve=timestamps -t "$copy"

cd "$copy"
cargo +nightly generate-lockfile --quiet -Z direct-minimal-versions ||
  fail "the manifests' requirements do not resolve at their floors: raise the requirement named above in the Cargo.toml that declares it"

# What was picked, so a failure below can be read against it.
echo "min_versions.sh: the library crates' direct dependencies at their floors:"
cargo tree --locked -p pool-api -p pool-core -p pool-ambient -p pool-postgres -p pool-sqlx --all-features -e normal,build,dev --depth 1 --prefix none |
  sed -E 's/ \(.*//' | grep -Ev '^(pool-|$)' | sort -u | paste -sd ' ' | fold -s -w 100 | sed 's/ *$//; s/^/  /'

CARGO_TARGET_DIR=$dir cargo test --locked -p pool-api -p pool-core -p pool-ambient -p pool-postgres -p pool-sqlx --all-features --lib "${run[@]}" ||
  fail "a library crate does not build or pass its unit tests with its direct dependencies at their floors:" \
    "raise the requirement of the dependency that the errors above point at (the versions picked are" \
    "listed above; the lock is $copy/Cargo.lock)"
