#!/usr/bin/env bash
# `make demo`'s job: the image world's protocols (`platonic demo`) and the audio world's negation
# (`platonic experiment negation --setup audio-world`), each world built on first use.
#
# The audio world (build and negation, on one thread; output in runs/demo-audio.log) runs beside the image world's
# build: a build keeps both cores busy only while it trains, and its data rendering, caption features and the
# negation's single-threaded fast path leave one idle, which the other fills. The image protocols start once the
# audio side is done, on both cores as `platonic demo` always runs (two threads beside other work would wait on
# each other). Every build job seeds itself and runs on one thread wherever it runs, so the worlds are the same; the
# audio negation on one thread printed the same tables as on two (docs/lab/2026-12-05-demo-side-by-side.md).
#
# Usage: scripts/demo.sh VENV_BIN
set -u
bin=${1:?"usage: scripts/demo.sh VENV_BIN (the bin directory of the virtual environment)"}
mkdir -p runs
log=runs/demo-audio.log

# its own session where setsid exists, so that the whole audio command (its build's worker processes too) can be
# stopped at once; else the command alone is stopped
session=$(command -v setsid || true)
OMP_NUM_THREADS=1 $session "$bin/platonic" experiment negation --setup audio-world -o runs/demo-audio \
  >"$log" 2>&1 </dev/null &
audio=$!
stop_audio() {
  # the session's group; the process alone where there is none (yet)
  if [ -z "$session" ] || ! kill -TERM -- "-$audio" 2>/dev/null; then kill -TERM "$audio" 2>/dev/null; fi
  wait "$audio" 2>/dev/null
}
trap 'stop_audio; exit 130' INT TERM
echo "the audio world's negation runs beside the image world's build (its output: $log)"

"$bin/platonic" world trunk-build --no-report
built=$?
if [ "$built" -ne 0 ]; then
  stop_audio
  exit "$built"
fi

echo "waiting for the audio world's negation to finish ($log)"
wait "$audio"
status=$?
trap - INT TERM
if [ "$status" -ne 0 ]; then
  echo "the audio world's negation failed (exit $status); the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit "$status"
fi

"$bin/platonic" demo || exit $?
echo
cat runs/demo-audio/tables.md
echo "report: runs/demo-audio/ (results.json, tables.md, plots)"
