#!/usr/bin/env bash
# `make demo`'s job: the image world's protocols (`platonic demo`) and the audio world's negation
# (`platonic experiment negation --setup audio-world`), each world built on first use.
#
# The audio side (its world's build and negation, output in runs/demo-audio.log) runs in the
# background at the lowest priority (nice 19), the image side (its world's build, then `platonic demo` on both
# cores) in the foreground. The image side is the longer chain (lite1-attn's pre-training, then its sources, then
# the protocols): at equal priority the audio side's workers slowed its jobs 2 to 3 times (a fresh clone on the
# 2-core AMD machine: lite1-attn's pre-training 843 s beside the audio build against 387 s alone), so the audio side
# now only fills the cores the image side leaves idle (its single-threaded steps, the build's last jobs, the
# protocols' fast paths) and finishes after it. `platonic demo`'s two threads run beside it nearly as alone (a
# two-thread job here: 4.0 s alone, 4.6 s beside two busy processes at nice 19, 9.8 s beside two at equal
# priority). Every build job seeds itself and runs on one thread wherever it
# runs, so the worlds are the same. The audio negation runs on torch's default threads, both cores once the image
# side is done (it comes last); it prints the same tables as on one thread (docs/lab/2026-12-05-demo-side-by-side.md,
# docs/lab/2026-12-07-demo-under-30-minutes.md). Where `nice` is missing it runs on one thread, beside the image side
# at equal priority.
#
# Usage: scripts/demo.sh VENV_BIN
set -u
bin=${1:?"usage: scripts/demo.sh VENV_BIN (the bin directory of the virtual environment)"}
mkdir -p runs
log=runs/demo-audio.log

# The audio command at the lowest priority where `nice` exists (its build's worker processes inherit it), in a
# process group of its own (job control for this one line), so that it can be stopped whole, its workers too. Not
# in a session of its own (setsid): Linux shares the CPU between sessions' autogroups before nice counts, so the
# audio side took half the cores again (seen in a fresh clone's run).
lowest=$(command -v nice || true)
if [ -n "$lowest" ]; then run=("$lowest" -n 19); else run=(env OMP_NUM_THREADS=1); fi
set -m
"${run[@]}" "$bin/platonic" experiment negation --setup audio-world -o runs/demo-audio >"$log" 2>&1 </dev/null &
audio=$!
set +m
stop_audio() {
  # its process group; the process alone where job control gave it none
  kill -TERM -- "-$audio" 2>/dev/null || kill -TERM "$audio" 2>/dev/null
  wait "$audio" 2>/dev/null
}
trap 'stop_audio; exit 130' INT TERM
echo "the audio world's negation runs in the background at low priority (its output: $log)"

"$bin/platonic" world trunk-build --no-report
built=$?
if [ "$built" -ne 0 ]; then
  stop_audio
  exit "$built"
fi

audio_failed() {
  echo "the audio world's negation failed (exit $1); the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit "$1"
}
if ! kill -0 "$audio" 2>/dev/null; then  # the audio side has ended already: a failure stops the script here
  wait "$audio"
  status=$?
  [ "$status" -ne 0 ] && { trap - INT TERM; audio_failed "$status"; }
fi

"$bin/platonic" demo
shown=$?
if [ "$shown" -ne 0 ]; then
  stop_audio
  exit "$shown"
fi

echo "waiting for the audio world's negation to finish ($log)"
wait "$audio"
status=$?
trap - INT TERM
[ "$status" -ne 0 ] && audio_failed "$status"
echo
cat runs/demo-audio/tables.md
echo "report: runs/demo-audio/ (results.json, tables.md, plots)"
