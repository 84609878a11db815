#!/usr/bin/env bash
# Prints package/feature for every feature of every workspace member but
# `default` and pool-benches' `peers`, comma-separated: the keys of the
# members' `[features]` tables, so a new feature is built and tested without
# an entry anywhere. The test command's passes, its rustdoc step and the
# public API check all build with this one set, so they share one build of
# the dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

for member in $(sed -n 's/^members = \[\(.*\)\]/\1/p' Cargo.toml | tr -d '",'); do
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$member/Cargo.toml" | head -n1)
  awk '/^\[/ { on = ($0 == "[features]") } on && /^[A-Za-z0-9_-]+ *=/ { sub(/ *=.*/, ""); print }' \
    "$member/Cargo.toml" | { grep -vx 'default' || true; } | sed "s|^|$name/|"
done | grep -vx 'pool-benches/peers' | paste -sd, -
