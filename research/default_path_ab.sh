#!/usr/bin/env bash
# The default single-process path of this tree beside an older one (docs/lab/2026-12-04-default-path-speed.md),
# alternating new / old: the cached demo and the audio negation, then the world's addition grid.
#   research/default_path_ab.sh OLD_SRC [RUNS]      e.g. OLD_SRC from `git worktree add /tmp/old 34def11` -> /tmp/old/src
set -euo pipefail
cd "$(dirname "$0")/.."
OLD_SRC=$1; RUNS=${2:-2}; PY=.venv/bin/python; OUT=${PLATONIC_RESEARCH_OUT:-/tmp/platonic-research}/default-path
mkdir -p "$OUT"
for i in $(seq "$RUNS"); do
  for tree in new old; do
    src=$PWD/src; [ "$tree" = old ] && src=$OLD_SRC
    s=$(date +%s.%N)
    PLATONIC_QUIET=1 PYTHONPATH=$src $PY -m platonic.cli demo -o "$OUT/$tree$i" > "$OUT/$tree$i.log" 2>&1
    m=$(date +%s.%N)
    PLATONIC_QUIET=1 PYTHONPATH=$src $PY -m platonic.cli experiment negation --setup audio-world -o "$OUT/$tree$i-audio" \
      > "$OUT/$tree$i-audio.log" 2>&1
    e=$(date +%s.%N)
    python3 -c "print(f'$tree run $i: demo {$m - $s:.1f} s, audio negation {$e - $m:.1f} s')"
  done
done
for i in $(seq "$RUNS"); do
  for tree in new old; do
    src=$PWD/src; [ "$tree" = old ] && src=$OLD_SRC
    PYTHONPATH=$src $PY research/addition_grid_time.py "$tree run $i" 2>/dev/null | tail -1
  done
done
