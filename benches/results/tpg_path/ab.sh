#!/bin/bash
# Interleaved A/B: base (main's pool-core) vs new, each run with the two peers.
# T: a folder with base/ and new/, each holding a release dbpoint
T=${T:?set T to the folder holding base/dbpoint and new/dbpoint}
ROUNDS=${ROUNDS:-3}
for v in off on; do for tasks in 16 256; do
  for r in $(seq 1 $ROUNDS); do for b in base new; do
    echo "## build=$b round=$r tasks=$tasks validation=$v load=$(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
    $T/$b/dbpoint $tasks 1 1 ours-mgr,deadpool-pg,bb8-pg $v | grep -v '^median'
  done; done
done; done
