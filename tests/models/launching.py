"""Run `platonic` as one process or as a launch of several (accelerate launch --multi_gpu on the CPU).

`accelerate launch --cpu --num_processes N` starts a single process (huggingface/accelerate#2741), so a
launch of N CPU processes goes through accelerate's torchrun path (`--multi_gpu`) with `--device cpu`:
each process joins the gloo group as process k of N. Both runs get one torch thread per process
(OMP_NUM_THREADS=1, as accelerate gives each launched process), so a one-process run and a launch do
the same float operations in the same order wherever the launch does not reorder them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
from tiny_models import clip_tokenizer, tiny_hf

SRC = Path(__file__).resolve().parents[2] / "src"
ACCELERATE = Path(sys.executable).parent / "accelerate"


def save_tiny_pair(first: Path, second: Path) -> None:
    """A random-weight transformers CLIP (hidden size 32) saved at `first`, and a copy with every weight moved by
    5% of its spread at `second` (another model of the same architecture, or a "fine-tune" of the first)."""
    import torch

    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    model.save(first)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.module.parameters():
            p.add_(0.05 * (p.std() if p.numel() > 1 else p.abs()) * torch.randn(p.shape, generator=g))
    model.save(second)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra) -> dict:
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PLATONIC_QUIET": "1", **extra}


def launch_command(program: list[str], processes: int) -> list[str]:
    """The command line of a CPU launch of `processes` copies of `program` (["-m", MODULE, ...] or [SCRIPT, ...])."""
    return [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", str(processes), "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()), *program]


def command(args, processes: int = 1) -> list[str]:
    """The command line of `platonic ARGS` alone (processes=1) or as a CPU launch of `processes`."""
    args = [str(a) for a in args]
    if processes == 1:
        return [sys.executable, "-m", "platonic.cli", *args]
    return launch_command(["-m", "platonic.cli", *args, "--device", "cpu"], processes)


def run(args, processes: int = 1, cache=None, timeout: float = 600):
    """Run `platonic ARGS` (on the cache folder `cache`, default $PLATONIC_CACHE); asserts it succeeded and
    returns it (`.stdout`). One process runs here, in the test's process on one torch thread (what a
    launched process gets, and seconds faster than a new interpreter); several as a CPU launch."""
    if processes == 1:
        from typer.testing import CliRunner

        from platonic.cli import app
        from platonic.experiments.engine import torch_threads

        with torch_threads(1):
            done = CliRunner().invoke(app, [str(a) for a in args], env={
                "PLATONIC_QUIET": "1", **({"PLATONIC_CACHE": str(cache)} if cache is not None else {})})
        assert done.exit_code == 0, f"exit {done.exit_code}\n{done.output[-3000:]}"
        return done
    env = environment(**({"PLATONIC_CACHE": str(cache)} if cache is not None else {}))
    done = subprocess.run(command(args, processes), env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def kill_when(args, ready, processes: int = 2, cache=None, timeout: float = 600) -> None:
    """Start `platonic ARGS` as a launch and kill it, the launcher and every process it started (SIGKILL), once
    `ready()` holds: as a machine that goes down would. (torchrun starts its workers in sessions of their
    own, so killing the launcher's process group alone would leave them running.)"""
    env = environment(**({"PLATONIC_CACHE": str(cache)} if cache is not None else {}))
    proc = subprocess.Popen(command(args, processes), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, "the launch ended before it could be killed"
            assert time.monotonic() < deadline, "the launch never reached the point to kill it at"
            time.sleep(0.05)
    finally:
        tree = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGKILL)
        for child in tree:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        proc.wait()
        psutil.wait_procs(tree, timeout=30)
