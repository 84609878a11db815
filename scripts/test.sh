#!/usr/bin/env bash
# The project's checks, all of them, every time (the README's test command;
# .ci/run runs it with DATABASE_URL, MYSQL_URL and CI=true exported):
#
#   1. cargo fmt --check, then scripts/import_graph.py (every file of every
#      crate: no import cycle, leaves below the engine, no two engine files
#      calling each other, every name the engine's journey cites defined)
#   2. started at once in a lane of their own, at the lowest priority (see
#      "Lanes" below): the loom models of the lock-free parts, every
#      schedule with up to four preemptions (LOOM_MAX_PREEMPTIONS); Miri
#      over the unsafe unit tests (scripts/miri.sh); the dependency floors'
#      build (scripts/min_versions.sh): every direct dependency resolved to
#      the lowest version its requirement allows, then the library crates
#      built with every feature
#   3. clippy on every target with every feature but the benches' `peers`
#      (see below), warnings denied; then rustdoc on every crate, warnings
#      denied, whose JSON output gives the public API of the library crates,
#      checked against the listings checked in (scripts/api_check.sh)
#   4. tests, paused-clock pass: the whole workspace with those features, so
#      pool-core's `tokio-clock` is on and the tests that drive time with
#      `start_paused` can (they fail to compile without it, on purpose);
#      built, then run in a lane. The example programs are not linked here:
#      clippy has checked them, and their smoke tests live in the examples
#      crate's library.
#   5. beside those tests, at the lowest priority: the doc tests, README.md's
#      dependency blocks, each in a new crate outside the workspace
#      (scripts/readme_deps.sh), each library crate alone with no feature
#      and with each of its features (scripts/feature_check.sh), and the
#      production-clock pass's build: pool-core without `tokio-clock`, so
#      the CPU-counter clock (quanta) is compiled and exercised
#   6. once both lanes have ended, what runs on real time: without the
#      database URLs, the tests that need only initdb, in a pass of their
#      own when initdb is there; the production-clock pass (its unit tests
#      and the engine tests that run on real time, the stress test among
#      them); the floors' unit tests, so each declared floor builds and
#      passes
#
# Lanes: on 2 cores the run is bound by CPU. The main build leaves a core
# idle at times (the last crates of a chain, linking) and the tests spend
# much of their time waiting on the databases and timeouts, so the steps
# that time nothing run beside them under `nice -n 19`, on the CPU left
# over, and the tests keep the priority they would have alone.
#
# Build cost (CI has 2 cores and 30 minutes): pass 4 builds everything once,
# with `debug = "limited"` for our crates (frames and lines for backtraces,
# which the leak tests read, without the types and variables a debugger
# shows; Cargo.toml keeps full debug info for a developer's own builds).
# The production-clock pass selects only pool-core with its default features, so sqlx (0.9 and
# 0.8) is not built again with other features, nor at all: only pool-core's
# dependencies, its unit tests and the engine test binary are compiled a
# second time, in the same debug profile (an optimised build of them cost
# CI about 50 s more). Loom and Miri build in target dirs of their own
# (loom/ and miri/ under the target dir) so they never invalidate the main
# build. The floor check builds in minimal/ under the target dir too: one
# more build of the library crates' dependencies, at their lowest versions
# (the examples and benches are resolved, not built).
#
# The benchmark peers stay out: every pass that used to say `--all-features`
# names every feature of every workspace member instead (read from their
# manifests, so a new feature is tested without an entry here), less
# pool-benches' `peers`: the pools the benches compare against (qp, mobc,
# fastpool, deadpool, bb8, deadpool-postgres, bb8-postgres, sqlx's pool),
# the plots and criterion. What needs them (`compare`, `dbpoint`, `faults`,
# the `micro` bench, the peer adapters) is built and linted by the
# benchmark commands, which pass `--features peers`; the harness, its
# scenarios and its quick tests are built, linted and run here over this
# pool and the floor. One feature set for every pass, so the passes share
# one build: 31 crates fewer than with `--all-features` (327 units against
# 362 for the paused-clock pass, `cargo test --unit-graph`).
#
# Measurements written as ignored tests (the ignore reason says "a
# measurement") are reports to run by hand: the paused-clock pass skips them
# by name (`measurements` below, read from the ignore reasons), so CI spends
# no time on them.
#
# Real-database tests are #[ignore]d with a reason that names what they
# need: "needs DATABASE_URL", "needs MYSQL_URL", "needs DATABASE_URL and
# pgbouncer", "needs initdb". With DATABASE_URL (PostgreSQL) and MYSQL_URL
# (MariaDB) both set they all run (--include-ignored); without them, the
# ones that need only initdb (a throw-away cluster of their own) still run
# when the PostgreSQL server binaries are there, in a pass of their own, and
# the rest are counted as ignored. Under CI a missing URL fails at once: CI
# never skips the database suites.
#
# The last line is the count of every test run by every pass (a test run in
# two passes counts twice), with the ignored ones by reason, e.g. without
# the URLs:
#
#   test.sh: N passed, 0 failed, M ignored (K need DATABASE_URL, L need MYSQL_URL, ...)
#
# Build settings are .ci/run's (no incremental caches), and every build,
# loom's and Miri's too, lands under CARGO_TARGET_DIR when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_INCREMENTAL=0
# Frames and lines only in our crates' test builds (see above); a value set
# by the caller wins.
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-limited}
target_dir=${CARGO_TARGET_DIR:-target}

started=$SECONDS
# The CPU seconds (user and system) of this script's commands that have
# ended so far (a lane's count when it is joined), shown with each step's
# wall-clock time: on 2 cores the run is bounded by CPU, so a change that
# grows its cost shows up here first. From /proc (the shell's `times` would
# run in a subshell and count nothing); empty where there is no /proc.
ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_seconds() {
  awk -v hz="$ticks" '{ sub(/^.*\) /, ""); printf "%d", ($12 + $13 + $14 + $15) / hz }' "/proc/$$/stat" 2>/dev/null || true
}
step() {
  echo
  echo "==> [$((SECONDS - started))s, $(cpu_seconds) cpu-s] $*"
}

in_ci=false
if [[ -n "${CI:-}" && "${CI}" != "false" && "${CI}" != "0" ]]; then in_ci=true; fi

# Every test pass's output, for the closing counts; `ran_alone` holds the
# initdb pass's, whose tests the paused-clock pass counted as ignored.
log=$(mktemp)
ran_alone=$(mktemp)
trap 'stop_lanes; rm -f "$log" "$ran_alone"' EXIT
failed_passes=()

# Runs a test pass, its output shown and kept in the log named first; a
# failing pass is recorded and the next passes still run.
tests() { # log, label, command...
  local into=$1 label=$2
  shift 2
  if ! "$@" 2>&1 | tee -a "$into"; then failed_passes+=("$label"); fi
}

# The closing line: totals from cargo's "test result:" lines, ignored tests
# by the reason libtest prints after "ignored, " (up to its colon).
counts() {
  awk -v alone="$ran_alone" '
    function add(line, sign,   i, n, f) {
      n = split(line, f, " ")
      for (i = 2; i <= n; i++) {
        if (f[i] ~ /^passed;?$/) passed += sign * f[i - 1]
        if (f[i] ~ /^failed;?$/) failed += sign * f[i - 1]
        if (f[i] ~ /^ignored;?$/) ignored += sign * f[i - 1]
      }
    }
    FILENAME == alone && /^test result: / {
      add($0, 1)
      n = split($0, f, " ")
      for (i = 2; i <= n; i++) if (f[i] ~ /^(passed|failed);?$/) ran_alone += f[i - 1]
      next
    }
    FILENAME == alone { next }
    /^test result: / { add($0, 1) }
    / \.\.\. ignored, / {
      r = $0; sub(/.* \.\.\. ignored, /, "", r); sub(/:.*/, "", r)
      if (r ~ /^needs /) { sub(/^needs /, "", r) } else { r = "(" r ")" }
      why[r]++
    }
    / \.\.\. ignored$/ { why["(no reason given)"]++ }
    END {
      # The initdb pass ran tests the paused-clock pass counted as ignored
      # (unless that pass was cut short): count them once, as run.
      once = ran_alone < why["initdb"] ? ran_alone : why["initdb"]
      ignored -= once
      why["initdb"] -= once
      line = sprintf("%d passed, %d failed, %d ignored", passed, failed, ignored)
      sep = " ("
      # The reasons, most tests first (ties by name), so the line is stable.
      while (1) {
        best = ""
        for (r in why) if (why[r] > 0 && (best == "" || why[r] > why[best] || (why[r] == why[best] && r < best))) best = r
        if (best == "") break
        line = line sep why[best] (best ~ /^\(/ ? " " : " need ") best
        sep = ", "
        delete why[best]
      }
      if (sep == ", ") line = line ")"
      print line
    }
  ' "$log" "$ran_alone"
}

# Lanes: a list of steps run one after another in a background subshell,
# its output kept in a file and shown (and logged for the closing counts)
# when the lane is joined, with the labels of its failed passes. Its steps
# print their headers with the time they started.
declare -A lane_pid lane_out lane_failed
in_background() { # name, command (usually a function of this script)...
  local name=$1
  shift
  lane_out[$name]=$(mktemp)
  lane_failed[$name]=$(mktemp)
  (
    failed_passes=()
    "$@"
    if ((${#failed_passes[@]})); then printf '%s\n' "${failed_passes[@]}" >"${lane_failed[$name]}"; fi
  ) >"${lane_out[$name]}" 2>&1 &
  lane_pid[$name]=$!
}
join_lane() { # name
  local name=$1 label
  [[ -n ${lane_pid[$name]:-} ]] || return 0
  wait "${lane_pid[$name]}" || failed_passes+=("$name (ended early)")
  unset "lane_pid[$name]"
  step "$name: what it printed in the background"
  tee -a "$log" <"${lane_out[$name]}"
  while IFS= read -r label; do failed_passes+=("$label"); done <"${lane_failed[$name]}"
  rm -f "${lane_out[$name]}" "${lane_failed[$name]}"
}
stop_lanes() {
  local pid file
  for pid in "${lane_pid[@]}"; do
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  for file in "${lane_out[@]}" "${lane_failed[@]}"; do rm -f "$file"; done
}
failed() { # label: whether a pass of that label failed
  local label
  for label in "${failed_passes[@]}"; do [[ $label == "$1" ]] && return 0; done
  return 1
}
# The lowest priority, for the builds that run beside the tests.
low() { nice -n 19 "$@"; }

ignored_args=()
initdb_alone=false
if [[ -n "${DATABASE_URL:-}" && -n "${MYSQL_URL:-}" ]]; then
  ignored_args=(--include-ignored)
elif $in_ci; then
  echo "test.sh: FAILED: CI is set but DATABASE_URL and/or MYSQL_URL are not;" \
    "CI must run the real-database suites" >&2
  exit 1
else
  # The own-cluster tests find the server binaries in PG_BIN_DIR, else
  # /usr/lib/postgresql/*/bin, else `pg_config --bindir`; an initdb found
  # only on the PATH is passed on as PG_BIN_DIR.
  if [[ -z "${PG_BIN_DIR:-}" ]] && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    if initdb_path=$(command -v initdb); then export PG_BIN_DIR=$(dirname "$(readlink -f "$initdb_path")"); fi
  fi
  if [[ -n "${PG_BIN_DIR:-}" && -x "${PG_BIN_DIR}/initdb" ]] || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    initdb_alone=true
  fi
  echo "####################################################################"
  echo "## DATABASE SUITES SKIPPED: DATABASE_URL and MYSQL_URL are not both"
  echo "## set; the tests that need PostgreSQL or MariaDB show as ignored."
  echo "## e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test"
  echo "##      MYSQL_URL=mysql://root@127.0.0.1:3306/test"
  if $initdb_alone; then
    echo "## initdb is here: the tests that need only it run on their own."
  fi
  echo "####################################################################"
fi

features=$(scripts/workspace_features.sh)
[[ -n $features ]] || { echo "test.sh: FAILED: no workspace features read" >&2; exit 1; }

step "rustfmt"
cargo fmt --all --check

step "import graph (no import cycle, leaves below the engine, engine files calling one way, the journey's names defined)"
python3 scripts/import_graph.py

# The builds with target dirs of their own (loom's, Miri's, the floors')
# start now, in a lane beside everything else at the lowest priority, so
# they take only the CPU the main build and the tests leave idle: the main
# build has stretches on one core (the last crates of a chain, linking), and
# the tests spend most of their time waiting on the databases and timeouts.
# All three are deterministic and time nothing; the floors' unit tests,
# which do, run at the end (built here).
side_builds() {
  step "loom models"
  # Loom swaps std's atomics and mutexes for its model checker's; it needs
  # its own build (different cfg), kept apart so the main build stays
  # cached. The search is bounded at four preemptions per schedule (a
  # caller's value wins): the models then take about 7 s instead of about
  # 56 s, two of them 18-20 s each unbounded. Each of three bugs put in by
  # hand is caught at two, three and four preemptions alike: the Release
  # that publishes a handed-over connection made Relaxed (six models fail),
  # the SeqCst fence between a slot's free and `close` removed (one, as
  # unbounded), the one between a park and a queuing caller removed
  # (four). Run them unbounded by hand with the command in
  # pool-core/src/engine/loom_tests.rs.
  LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-4} \
    RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-$target_dir/loom}" \
    tests /dev/null "loom models" \
    low cargo test -p pool-core --no-default-features --lib --release -- loom

  step "Miri"
  MIRI_TARGET_DIR="${MIRI_TARGET_DIR:-$target_dir/miri}" tests /dev/null "Miri" low scripts/miri.sh

  step "dependency floors: build (direct dependencies at their lowest versions)"
  # A requirement below what the code uses (a method a later patch release
  # added) fails here rather than in a user's build locked at that release.
  tests /dev/null "dependency floors (build)" low scripts/min_versions.sh --no-run
}
export MIN_VERSIONS_TARGET_DIR="${MIN_VERSIONS_TARGET_DIR:-$target_dir/minimal}"
step "loom, Miri and the dependency floors: building in the background (output at the end)"
in_background "loom, Miri, floors" side_builds

step "clippy (features: $features)"
cargo clippy --workspace --all-targets --features "$features" -- -D warnings

# The docs of every crate, warnings (broken or private links, bad HTML)
# denied, and the public API of the library crates against the listings
# checked in: one rustdoc run, its JSON output read by scripts/api_check.sh
# (the dependencies' metadata is clippy's, so this is rustdoc on our crates
# only). A change to the public API fails here until the listing is
# updated (scripts/api_check.sh --bless), so it shows as a diff in review.
step "rustdoc (warnings denied) and the public API (against each library crate's public-api.txt)"
tests "$log" "rustdoc and the public API" scripts/api_check.sh

# The ignored tests that are measurements, not checks (run them by hand with
# --ignored --nocapture): every test whose ignore reason starts with "a
# measurement", found in the sources, so a new one needs no entry here.
measurements=()
while read -r name; do measurements+=(--skip "$name"); done < <(
  grep -rh -A3 '#\[ignore = "a measurement' pool-core/tests integrations examples benches |
    sed -nE 's/.*fn ([A-Za-z0-9_]+).*/\1/p'
)

# Tests and examples leave nothing in the shared databases: with the URLs
# set, the tables of both (PostgreSQL: every schema but the system ones;
# MariaDB: the URL's database) are listed before the test passes and again
# at the end, and a table that was not there before fails the run, named.
shared_tables() {
  psql "$DATABASE_URL" -XAtq -c "SELECT 'postgres: ' || schemaname || '.' || tablename
      FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')" || return 1
  # mysql://user[:password]@host[:port]/database, as the tests read it.
  local rest=${MYSQL_URL#*://} user=root password= host port=3306 database
  if [[ $rest == *@* ]]; then
    user=${rest%%@*}
    rest=${rest#*@}
    if [[ $user == *:* ]]; then password=${user#*:}; user=${user%%:*}; fi
  fi
  host=${rest%%/*}
  database=${rest#*/}
  database=${database%%\?*}
  if [[ $host == *:* ]]; then port=${host##*:}; host=${host%:*}; fi
  MYSQL_PWD=$password mysql -h "$host" -P "$port" -u "$user" -N -B -e \
    "SELECT CONCAT('mariadb: ', table_schema, '.', table_name) FROM information_schema.tables
     WHERE table_schema = '$database'" || return 1
}
# `tables_listed` says whether the list before was read: an empty list (no
# table at all) is a list, and the check at the end still runs.
tables_before=
tables_listed=false
if [[ ${#ignored_args[@]} -gt 0 ]]; then
  if tables_before=$(shared_tables); then
    tables_before=$(LC_ALL=C sort <<<"$tables_before")
    tables_listed=true
  else
    echo "test.sh: cannot list the shared databases' tables (psql and mysql are needed)" >&2
    if $in_ci; then exit 1; fi
    tables_before=unknown
  fi
fi

# The paused-clock pass is built, then run in a lane of its own: its tests
# spend most of their time waiting on the databases, their own clusters and
# proxies, and timeouts, so the next steps (the doc tests, the README
# blocks, each crate alone, the production-clock build; none
# times anything) run beside it at the lowest priority, and the tests keep
# the priority they would have alone. What times anything on real time
# (the production-clock pass, the floors' unit tests, the initdb pass) runs
# once every lane has ended. Cargo holds its build lock only while it
# builds, so the steps beside the tests share the target dir.
paused_clock_tests() {
  tests /dev/null "tests, paused clock" \
    cargo test --workspace --features "$features" --no-fail-fast --tests -- "${ignored_args[@]}" "${measurements[@]}"
}
step "tests, paused clock: build (every crate, every feature but the benchmark peers)"
if cargo test --workspace --features "$features" --tests --no-run; then
  step "tests, paused clock: running in the background (output at the end)"
  in_background "tests, paused clock" paused_clock_tests
else
  failed_passes+=("tests, paused clock (build)")
fi

step "doc tests (every crate, every feature but the benchmark peers)"
tests "$log" "doc tests" \
  low cargo test --workspace --features "$features" --no-fail-fast --doc

step "README dependency blocks (a new crate per block, outside the workspace)"
low scripts/readme_deps.sh || failed_passes+=("README dependency blocks")

step "each library crate alone, with each of its features"
# `cargo check -p CRATE --no-default-features --features F` per feature
# (feature sets the main build never uses: their own artifacts, beside it).
tests "$log" "crates alone" low scripts/feature_check.sh

step "tests, production clock: build (pool-core without tokio-clock)"
tests "$log" "tests, production clock (build)" \
  low cargo test -p pool-core --lib --test engine --no-run

join_lane "tests, paused clock"
join_lane "loom, Miri, floors"

if $initdb_alone; then
  step "tests that need only initdb (their own throw-away clusters)"
  # The tests whose every ignored test needs only initdb, by test binary:
  # a file under pool-core/tests/ or integrations/testsuite/tests/ is one; a folder there with a main.rs is
  # one whose modules are its other files, nested folders included, picked
  # one by one (a module that also has tests needing a URL is left out,
  # and said so).
  ran_initdb=false
  for target in pool-core/tests/*.rs pool-core/tests/*/main.rs \
    integrations/testsuite/tests/*.rs integrations/testsuite/tests/*/main.rs; do
    if [[ $target == */main.rs ]]; then
      name=$(basename "$(dirname "$target")")
      mapfile -t modules < <(find "$(dirname "$target")" -name '*.rs' ! -path "$target" | sort)
    else
      name=$(basename "$target" .rs)
      modules=("$target")
    fi
    filters=()
    found=false
    for source in "${modules[@]}"; do
      if ! grep -q 'ignore = "needs initdb' "$source"; then continue; fi
      if grep -h '#\[ignore' "$source" | grep -vq 'needs initdb'; then
        echo "test.sh: $source also has tests that need a URL: its initdb tests stay ignored"
        continue
      fi
      found=true
      if [[ $target == */main.rs ]]; then
        # tests/postgres/hosts/failover.rs -> hosts::failover::
        path=${source#"$(dirname "$target")"/}
        path=${path%.rs}
        path=${path%/mod}
        filters+=("${path//\//::}::")
      fi
    done
    if ! $found; then continue; fi
    ran_initdb=true
    tests "$ran_alone" "tests that need only initdb ($name)" \
      cargo test --workspace --features "$features" --no-fail-fast --test "$name" -- --ignored "${filters[@]}"
  done
  $ran_initdb || echo "test.sh: no test needs only initdb"
fi

step "tests, production clock (pool-core without tokio-clock)"
# The engine's tests that run on real time (no `start_paused`); the
# modules on the paused clock are left out of this build. The stress test
# (tests/engine/stress.rs, everything at once for a bounded time) runs here
# on the production clock and in the paused-clock pass on tokio's.
tests "$log" "tests, production clock" \
  cargo test -p pool-core --no-fail-fast --lib --test engine

if ! failed "dependency floors (build)"; then
  step "dependency floors: the library crates' unit tests"
  tests "$log" "dependency floors" scripts/min_versions.sh
fi

if $tables_listed; then
  step "tables left in the shared databases"
  if tables_after=$(shared_tables); then
    left=$(LC_ALL=C comm -13 <(echo "$tables_before") <(LC_ALL=C sort <<<"$tables_after"))
    if [[ -n $left ]]; then
      echo "test.sh: the tests left these tables (drop them when they are done, on every path):"
      echo "$left" | sed 's/^/  /'
      failed_passes+=("tables left in the shared databases")
    else
      echo "test.sh: no table left"
    fi
  else
    failed_passes+=("tables left in the shared databases (cannot list them)")
  fi
fi

# The build's footprint, so a change that grows it shows up in the log.
echo "test.sh: target dir: $(du -sh "$target_dir" 2>/dev/null | cut -f1)"
if ((${#failed_passes[@]})); then
  step "FAILED after $((SECONDS - started))s: ${failed_passes[*]}"
  echo "test.sh: FAILED: $(counts)"
  exit 1
fi
step "all checks passed in $((SECONDS - started))s"
echo "test.sh: $(counts)"
