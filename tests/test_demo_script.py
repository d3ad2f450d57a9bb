"""scripts/demo.sh, `make demo`'s job, on a stand-in `platonic` that records its calls: the audio side runs at the
lowest priority beside the image world's build and demo (on one thread where `nice` is missing), the script waits
for it before printing its table, and a failure on either side stops the other (or, the audio side's, comes after
the image demo) and becomes the script's exit status with the audio side's log shown."""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "demo.sh"

# Stand-in: appends "<start|end> <args> threads=<OMP_NUM_THREADS> nice=<niceness> group=<process group>" to $CALLS; the audio negation ends only after the
# image build has ended (20 s at most), so it provably runs beside it, and a failed build leaves it running until
# the script stops it; $FAIL names the subcommand that exits 3.
STUB = textwrap.dedent("""\
    #!/usr/bin/env bash
    ni=$(ps -o ni= -p $$); group=$(ps -o pgid= -p $$)
    echo "start $* threads=${OMP_NUM_THREADS:-default} nice=${ni// /} group=${group// /}" >> "$CALLS"
    case "$1 $2" in
      "experiment negation")
        for _ in {1..200}; do [[ $(<"$CALLS") == *"end world"* ]] && break; sleep 0.1; done
        mkdir -p runs/demo-audio; echo "audio table" > runs/demo-audio/tables.md ;;
    esac
    if [ -n "${FAIL:-}" ] && [ "$1" = "$FAIL" ]; then echo "stand-in failure of $1" >&2; exit 3; fi
    echo "end $1" >> "$CALLS"
    """)


def _run(tmp_path: Path, fail: str = "", nice: bool = True) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "platonic").write_text(STUB)
    (bin_dir / "platonic").chmod(0o755)
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "CALLS": str(calls), "FAIL": fail}
    env.pop("OMP_NUM_THREADS", None)
    # a PATH of only the tools the script and the stand-in use; without `nice`, as on a machine that lacks it
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "mkdir", "cat", "tail", "sleep", "ps", "env") + (("nice",) if nice else ()):
        (tools / tool).symlink_to(shutil.which(tool))
    env["PATH"] = str(tools)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(["bash", str(SCRIPT), str(bin_dir)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)
    return done, calls.read_text().splitlines()


def _start(calls: list[str], command: str) -> tuple[int, dict]:
    """(index, {"threads", "nice", "group"}) of the stand-in's start line of `command`."""
    k = next(i for i, c in enumerate(calls) if c.startswith(f"start {command} threads="))
    return k, dict(f.split("=") for f in calls[k][len(f"start {command} "):].split())


@pytest.mark.parametrize("nice", [True, False])
def test_the_audio_side_runs_at_low_priority_beside_the_image_side(tmp_path, nice):
    done, calls = _run(tmp_path, nice=nice)
    assert done.returncode == 0, done.stderr
    # launched first, but the two sides run at once, so either may write its first line first
    _, audio = _start(calls, "experiment negation --setup audio-world -o runs/demo-audio")
    build, image = _start(calls, "world trunk-build --no-report")
    demo, shown = _start(calls, "demo")
    # both cores once the image side is done, at low priority; one thread where it runs beside it at equal priority
    assert audio["threads"] == ("default" if nice else "1") and image["threads"] == shown["threads"] == "default"
    assert audio["nice"] == ("19" if nice else "0") and image["nice"] == shown["nice"] == "0"
    # a process group of its own (to be stopped whole) in the script's session, so that its nice counts
    assert audio["group"] != image["group"] == shown["group"]
    assert build < calls.index("end experiment")  # the build started while the audio side ran
    assert demo > calls.index("end world")  # the image demo follows its world's build, not the audio side
    assert "end demo" in calls and "end experiment" in calls
    assert done.stdout.rstrip().splitlines()[-2] == "audio table"  # printed once the audio side is done
    assert (tmp_path / "work" / "runs" / "demo-audio.log").exists()


@pytest.mark.parametrize("nice", [True, False])
@pytest.mark.parametrize("fail, shown", [("experiment", "stand-in failure of experiment"), ("world", ""), ("demo", "")])
def test_a_failure_on_either_side_is_the_scripts_exit_status(tmp_path, fail, shown, nice):
    done, calls = _run(tmp_path, fail, nice)
    assert done.returncode == 3
    if fail == "world":
        assert not any(c.startswith("start demo") for c in calls)  # nothing runs after a failed build
        assert "end experiment" not in calls  # the audio side (waiting for the build's end) was stopped
    assert shown in done.stderr
