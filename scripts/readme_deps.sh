#!/usr/bin/env bash
# Checks that README.md's dependency blocks work from a clone: each ```toml
# block that depends on pool-core by path, with the ```rust block right after
# it as src/main.rs, becomes a new crate outside the workspace (its own
# `[workspace]`), whose path is pointed at this checkout and which is built
# with `cargo check` against a copy of the workspace's Cargo.lock, so it
# resolves the versions the tests ran with and needs no registry look-up.
#
# The crates live under READMEDEPS_DIR (default: readme-deps/ under the
# target dir) and share the target dir itself, so the dependencies the
# workspace build already checked are reused; warm, the step takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}
case $target_dir in /*) ;; *) target_dir=$repo/$target_dir ;; esac
dir=${READMEDEPS_DIR:-$target_dir/readme-deps}
rm -rf "$dir"
mkdir -p "$dir"

# Splits README.md into crate-N/Cargo.toml (from a dependency block) and
# crate-N/src/main.rs (from the rust block after it).
awk -v dir="$dir" -v repo="$repo" '
  /^```toml$/ { block = "toml"; text = ""; next }
  /^```rust$/ { block = "rust"; text = ""; next }
  /^```/ && block == "" { block = "other"; next }
  /^```$/ {
    if (block == "toml" && text ~ /pool-core = \{ path = /) {
      if (pending) { print "readme_deps.sh: dependency block " n " has no rust block after it" > "/dev/stderr"; exit 1 }
      n++; pending = 1
      gsub(/path = "[^"]*pool-core"/, "path = \"" repo "/pool-core\"", text)
      gsub(/path = "[^"]*pool-postgres"/, "path = \"" repo "/integrations/pool-postgres\"", text)
      gsub(/path = "[^"]*pool-sqlx"/, "path = \"" repo "/integrations/pool-sqlx\"", text)
      gsub(/path = "[^"]*pool-ambient"/, "path = \"" repo "/integrations/pool-ambient\"", text)
      crate = dir "/crate-" n
      system("mkdir -p " crate "/src")
      printf "[package]\nname = \"readme-deps-%d\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n\n", n > (crate "/Cargo.toml")
      # The workspace builds dependencies without debug info; so does this
      # crate, so it reuses their artifacts.
      printf "%s\n[profile.dev.package.\"*\"]\ndebug = false\n", text >> (crate "/Cargo.toml")
      close(crate "/Cargo.toml")
    } else if (block == "rust" && pending) {
      printf "%s", text > (dir "/crate-" n "/src/main.rs")
      close(dir "/crate-" n "/src/main.rs")
      pending = 0
    } else if (pending && block != "") {
      print "readme_deps.sh: dependency block " n " is not followed by a rust block" > "/dev/stderr"; exit 1
    }
    block = ""; next
  }
  block != "" { text = text $0 "\n" }
  END {
    if (pending) { print "readme_deps.sh: dependency block " n " has no rust block after it" > "/dev/stderr"; exit 1 }
    if (n == 0) { print "readme_deps.sh: no dependency block found in README.md" > "/dev/stderr"; exit 1 }
  }
' README.md

status=0
for crate in "$dir"/crate-*; do
  cp Cargo.lock "$crate/"
  deps=$(grep -E '^[a-z0-9_-]+ = ' "$crate/Cargo.toml" | grep -v '^name\|^version\|^edition\|^publish\|^debug' | cut -d' ' -f1 | tr '\n' ' ')
  if CARGO_TARGET_DIR=$target_dir cargo check --quiet --offline --manifest-path "$crate/Cargo.toml"; then
    echo "readme_deps.sh: $(basename "$crate") ($deps) compiles"
  else
    echo "readme_deps.sh: FAILED: $(basename "$crate") ($deps); the crate is $crate" >&2
    status=1
  fi
done
exit $status
