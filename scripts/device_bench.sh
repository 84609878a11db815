#!/usr/bin/env bash
# The many-cores table (S1-S3 by tokio workers) on a machine with many cores and no
# toolchain or package registry: it runs release binaries built elsewhere
# and carried in a git-ignored folder (default devbin/; DEVELOPERS.md says
# how to fill it). One bounded call: at most BUDGET_S seconds in all
# (default 530, under 9 minutes), progress on stderr as it goes, results
# under $OUT/many_cores (or device_results/many_cores without $OUT).
#
#   scripts/device_bench.sh
#   # a local check that the script works end to end (well under a minute)
#   QUICK=1 WORKERS=1,2 OUT=/tmp/devcheck scripts/device_bench.sh
#
# Settings (environment):
#   BIN_DIR   folder of the binaries (default devbin)
#   WORKERS   tokio worker counts (default 1,2,4,8,16)
#   POOLS     contestants (default ours,deadpool,bb8,qp,fastpool,floor)
#   POINTS    S2 points, pool size x tasks (default 16x16,64x64,16x256)
#   QUICK     1: compare's --quick durations and one repeat (a smoke test,
#             not figures)
#   BUDGET_S  the bound on the whole script, seconds (default 530)
#
# Exit status: 0 when the table is complete; 3 when the budget cut the run
# short (compare writes its results after every part, so what it finished
# is there); 2 for a missing binary or a bad setting.
set -euo pipefail

BIN_DIR=${BIN_DIR:-devbin}
WORKERS=${WORKERS:-1,2,4,8,16}
POOLS=${POOLS:-ours,deadpool,bb8,qp,fastpool,floor}
POINTS=${POINTS:-16x16,64x64,16x256}
QUICK=${QUICK:-0}
BUDGET_S=${BUDGET_S:-530}
RES="${OUT:-device_results}/many_cores"
START=$SECONDS

say() { printf '[%4d s] %s\n' "$((SECONDS - START))" "$*" >&2; }
die() { echo "device_bench: $*" >&2; exit 2; }

for b in compare s1_time; do
    [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b is missing: build with
  cargo build --release -p pool-benches --features peers --bins
and copy target/release/{compare,point,s1_time} into $BIN_DIR/ (see DEVELOPERS.md)"
done
if ldd "$BIN_DIR/compare" 2>/dev/null | grep -q 'not found'; then
    die "$BIN_DIR/compare needs libraries this machine lacks: $(ldd "$BIN_DIR/compare" | grep 'not found')"
fi
[[ "$BUDGET_S" =~ ^[0-9]+$ ]] && [ "$BUDGET_S" -ge 30 ] || die "BUDGET_S must be a number of seconds >= 30"

mkdir -p "$RES"
LOG="$RES/run.log"
: >"$LOG"

# 1. The machine, as the table will need to describe it.
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host cores: $(nproc) ($(getconf _NPROCESSORS_ONLN) online)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
    echo "tsc flags: $(grep -m1 -o -w -E 'constant_tsc|nonstop_tsc|tsc_reliable' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "kernel: $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: WORKERS=$WORKERS POOLS=$POOLS POINTS=$POINTS QUICK=$QUICK BUDGET_S=$BUDGET_S"
} | tee "$RES/machine.txt" >&2

# 2. Ours alone on the current-thread runtime (the S1 loop without the
#    harness): three short rounds, a few seconds.
say "s1_time: ours, current-thread runtime, 3 rounds"
n=3000000
[ "$QUICK" = 1 ] && n=100000
for r in 1 2 3; do
    printf 'round %d: %s\n' "$r" "$("$BIN_DIR/s1_time" "$n")"
done | tee "$RES/s1_time.txt" >&2

# 3. S1-S3 by workers, every contestant in the same run.
args=(--only S1,S2,S3 --workers "$WORKERS" --pools "$POOLS" --points "$POINTS" --out "$RES")
[ "$QUICK" = 1 ] && args+=(--quick)
left=$((BUDGET_S - (SECONDS - START) - 15))
[ "$left" -ge 15 ] || die "no time left for compare (BUDGET_S=$BUDGET_S)"
say "compare ${args[*]} (at most $left s)"
status=0
timeout --signal=TERM --kill-after=5 "$left" "$BIN_DIR/compare" "${args[@]}" \
    >"$RES/compare.stdout" 2> >(tee -a "$LOG" >&2) || status=$?
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$RES/machine.txt" >&2

# 4. The table by workers, printed so that the end of the output holds it.
if [ -f "$RES/compare.md" ]; then
    echo
    awk '/^### /{on = /^### Many cores/} on' "$RES/compare.md"
fi
case $status in
    0) say "done: $RES" ;;
    124 | 137)
        say "the budget cut compare short: the table above has what it finished ($RES)"
        exit 3
        ;;
    *)
        say "compare failed with status $status (see $LOG)"
        exit "$status"
        ;;
esac
