#!/usr/bin/env bash
# S7 (the HTTP service under wrk) with wrk on cores of its own: a private
# PostgreSQL cluster and the service both pinned to SERVICE_CPUS, wrk to
# WRK_CPUS, so that the load generator no longer takes its share of the
# service's cores and the requests per second measure the service (pool,
# manager, driver, database) instead of which of three processes the
# scheduler ran.
#
#   cargo build --release -p pool-benches --features peers,sqlx-manager --bin compare
#   scripts/s7_wrk_own_core.sh            # results in benches/out/s7_pinned/
#   RUNS=3 REPEATS=3 OUT=/tmp/s7 scripts/s7_wrk_own_core.sh
#
# The shared server on 5432 is not touched: the cluster is made with initdb
# in a temporary folder, runs as the postgres user on PORT, and is stopped
# and deleted at the end (also on failure). Each of RUNS calls of
# `compare --only S7` interleaves every contestant REPEATS times; the
# results of run N go to $OUT/run_N/.
#
# Settings (environment):
#   SERVICE_CPUS  cores of the service and the cluster (default 0)
#   WRK_CPUS      cores of wrk (default 1)
#   PORT          the cluster's port (default 5497)
#   RUNS          compare runs (default 1)
#   REPEATS       rounds per run (default 3)
#   BIN           the compare binary (default target/release/compare)
#   OUT           results folder (default benches/out/s7_pinned)
#
# Exit status: 0 when every run finished, 2 for a missing tool or a bad
# setting, else compare's or the cluster's failure.
set -euo pipefail

SERVICE_CPUS=${SERVICE_CPUS:-0}
WRK_CPUS=${WRK_CPUS:-1}
PORT=${PORT:-5497}
RUNS=${RUNS:-1}
REPEATS=${REPEATS:-3}
BIN=${BIN:-target/release/compare}
OUT=${OUT:-benches/out/s7_pinned}

die() { echo "s7_wrk_own_core: $*" >&2; exit 2; }

[ -x "$BIN" ] || die "$BIN is missing: cargo build --release -p pool-benches --features peers,sqlx-manager --bin compare"
for t in taskset wrk runuser; do
    command -v "$t" >/dev/null || die "$t is not installed"
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || die "PostgreSQL server binaries (initdb, pg_ctl) not found"
[[ "$RUNS" =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 1 ] && [ "$RUNS" -le 20 ] || die "RUNS: a number in 1..=20"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT: a port number"
taskset -c "$SERVICE_CPUS" true 2>/dev/null || die "SERVICE_CPUS $SERVICE_CPUS: not a usable core list"
taskset -c "$WRK_CPUS" true 2>/dev/null || die "WRK_CPUS $WRK_CPUS: not a usable core list"

DIR=$(mktemp -d /tmp/s7_cluster.XXXXXX)
chown postgres "$DIR"
as_pg() { runuser -u postgres -- "$@"; }
stop_cluster() {
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap stop_cluster EXIT

as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
# Started under taskset: the postmaster and every backend it forks keep the
# service's cores.
taskset -c "$SERVICE_CPUS" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -w \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" \
    -l "$DIR/server.log" start >/dev/null
as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres test

mkdir -p "$OUT"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "cores: $(nproc); service and cluster on $SERVICE_CPUS, wrk on $WRK_CPUS"
    echo "server: $("$PGBIN/postgres" --version)"
    echo "runs: $RUNS x compare --only S7 --repeats $REPEATS"
} | tee "$OUT/setup.txt"
for run in $(seq 1 "$RUNS"); do
    echo "run $run of $RUNS" >&2
    taskset -c "$SERVICE_CPUS" "$BIN" --only S7 --repeats "$REPEATS" \
        --db "postgres://postgres@127.0.0.1:$PORT/test" \
        --wrk-cpus "$WRK_CPUS" --out "$OUT/run_$run"
done
