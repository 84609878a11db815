#!/usr/bin/env bash
# Instruction counts per cycle under callgrind, every database contestant
# (the binaries built with `--features peers`),
# each at N and 2N cycles (per_cycle.py takes the difference over N):
#
#   count_db.sh s5 OUTFILE LABEL TASKS [N]   # s5_cycles: a query (get, SELECT 1, drop)
#   count_db.sh s7 OUTFILE LABEL CONNS [N]   # s7_cycles: an HTTP request to S7's service
#
# Appends "LABEL POOL LOAD N TOTAL" lines to OUTFILE. Settings:
# BIN (default target/release/s5_cycles or s7_cycles), VALIDATE=on|off
# (s5, default off; LOAD is then TASKS/VALIDATE), WORKERS (s7, default 2),
# POOLS (default all six). DATABASE_URL as for the binaries.
set -euo pipefail
what=$1 out=$2 label=$3 load=$4 n=${5:-2048}
pools=${POOLS:-ours-mgr ours-tp deadpool-pg bb8-pg ours-sqlx sqlx}
case $what in
  s5) bin=${BIN:-target/release/s5_cycles} zero='s5_cycles::cycles'
      extra=${VALIDATE:-off} tag=$load/${VALIDATE:-off} ;;
  s7) bin=${BIN:-target/release/s7_cycles} zero='s7_cycles::counted'
      extra=${WORKERS:-2} tag=$load ;;
  *) echo "count_db.sh s5|s7 OUTFILE LABEL LOAD [N]" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pool in $pools; do
  for count in "$n" $((2 * n)); do
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --zero-before="$zero" \
      "$bin" "$count" "$pool" "$load" "$extra" >/dev/null 2>"$tmp/log" \
      || { cat "$tmp/log" >&2; exit 1; }
    echo "$label $pool $tag $count $(awk '/^totals:/ {print $2}' "$tmp/cg")" >> "$out"
  done
done
