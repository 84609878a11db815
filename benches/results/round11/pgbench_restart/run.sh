#!/usr/bin/env bash
# The server alone after a restart, with pgbench as the client (C, cheap per
# query): 16 clients of `SELECT 1` for 2 s, then either a stop / 3 s / start
# of the server ("restart") or 3 s of nothing ("control"), then 2 s more
# from fresh connections; per-transaction logs, summarised by summarise.py.
# A private cluster on PORT (initdb in a temp dir), never the shared server.
set -euo pipefail
PORT=${PORT:-5496}
OUT=$(cd "$(dirname "$0")" && pwd)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
DIR=$(mktemp -d /tmp/pgb_restart.XXXXXX); chown postgres "$DIR"
pg() { runuser -u postgres -- "$@"; }
trap 'pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
pg "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust >/dev/null
start() { pg "$PGBIN/pg_ctl" -D "$DIR/data" -w -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off" -l "$DIR/log" start >/dev/null; }
start
echo 'SELECT 1;' > "$DIR/s1.sql"; chmod a+r "$DIR/s1.sql"
rm -rf "$OUT/logs"; mkdir -p "$OUT/logs"  # 70 MB of logs: summarise, then delete; chmod a+rwx "$OUT/logs"
bench() { (cd "$OUT/logs" && pg "$PGBIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U postgres -c 16 -j 2 -T 2 -M "$1" -f "$DIR/s1.sql" -l --log-prefix="$2" postgres >/dev/null 2>&1); }
for rep in 1 2 3; do
  for mode in simple prepared; do
    for kind in restart control; do
      bench "$mode" "${mode}_${kind}_${rep}_a"
      if [ "$kind" = restart ]; then
        pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null; sleep 3; start
      else
        sleep 3
      fi
      bench "$mode" "${mode}_${kind}_${rep}_b"
    done
  done
done
echo done
