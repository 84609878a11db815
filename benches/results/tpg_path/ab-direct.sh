#!/bin/bash
# T: a folder with base/ and new/, each holding a release dbpoint
T=${T:?set T to the folder holding base/dbpoint and new/dbpoint}
for r in $(seq 1 8); do for b in base new; do
  echo "## build=$b round=$r tasks=256 validation=off load=$(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
  $T/$b/dbpoint 256 1 1 ours-mgr,ours-tp off | grep -v '^median'
done; done
