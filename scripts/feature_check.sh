#!/usr/bin/env bash
# Each library crate builds alone, with no feature and with each feature on
# its own (`cargo check -p CRATE --no-default-features --features F`): a
# feature that leans on another one, or code that only compiles because
# some other crate of the workspace turned a feature on, fails here. The
# features are read from each crate's `[features]` table, so a new one is
# checked without an entry here.
set -euo pipefail
cd "$(dirname "$0")/.."

crates=(pool-api pool-core integrations/pool-ambient integrations/pool-postgres integrations/pool-sqlx)
status=0
for dir in "${crates[@]}"; do
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -n1)
  features=$(awk '/^\[/ { on = ($0 == "[features]") } on && /^[A-Za-z0-9-]+ *=/ { sub(/ *=.*/, ""); print }' \
    "$dir/Cargo.toml" | grep -vx 'default' || true)
  for feature in "" $features; do
    if cargo check --quiet -p "$name" --lib --no-default-features ${feature:+--features "$feature"}; then
      echo "feature_check.sh: $name ${feature:-(no feature)} builds alone"
    else
      echo "feature_check.sh: FAILED: $name ${feature:-(no feature)} does not build alone" >&2
      status=1
    fi
  done
done
exit $status
