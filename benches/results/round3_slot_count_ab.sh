#!/usr/bin/env bash
# Interleaved A/B: main (guard clones the pool Arc) vs slotref (parked slot keeps the count).
# A and B: the release dirs of the two builds (run from each checkout:
# cargo build --release -p pool-benches --bins).
A=${A:?set A to the main build's target/release}
B=${B:?set B to the slotref build's target/release}
echo "# $(date -u +%FT%TZ) $(uptime)"
for r in 1 2 3; do
  for pair in "main $A" "slotref $B"; do
    set -- $pair
    echo "## round $r: $1"
    echo "S1: $($2/s1_time 5000000 2>&1 | tail -1)"
    $2/point 16 16 1 3 ours,qp --workers 1,2 2>&1 | grep -E "^w=[0-9]+ (run|median)"
    $2/point 64 64 1 3 ours,qp --workers 2 2>&1 | grep -E "^w=[0-9]+ median"
    $2/point 16 256 1 3 ours --workers 2 2>&1 | grep -E "^w=[0-9]+ (run|median)"
  done
done
echo "# end $(date -u +%FT%TZ) $(uptime)"
