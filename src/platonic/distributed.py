"""The processes of one launch (accelerate or torchrun): data parallel for one big job, job parallel for many.

platonic launches nothing itself. `accelerate launch --multi_gpu --num_processes N -m platonic.cli CMD ...`
(or `torchrun --nproc_per_node N -m platonic.cli CMD ...`) starts N copies of a command; each reads its
rank from the environment (WORLD_SIZE, RANK, LOCAL_RANK) and `join` makes them one process group through
accelerate's `PartialState` (NCCL between GPUs, gloo on the CPU). Process k takes GPU k of its node
(`process_device`). Nothing is imported from accelerate, and no collective runs, in a plain
single-process command: the default path is the code that ran before.

Two ways the processes share work:

- data parallel, one big job (`platonic finetune`, the adapter fit, feature extraction): `current()` is
  the launch's group; each process takes its shard of every batch (`Group.shard`), gradients are summed
  over processes (`Group.sum_`, one all-reduce per step over a flat buffer, as DDP does), features are
  gathered (`Group.gather`) and only the main process writes;
- job parallel, many independent jobs (`platonic run`, `platonic experiment`): `spread` gives job i to
  process i mod N; each job runs inside `solo()`, where `current()` is a group of one, so the job's own
  code runs as in a single process (the others are busy with other jobs: no collective may run inside).
  Jobs fill the shared on-disk caches (locked writes, `platonic.locks`), so a killed launch resumes with
  the jobs it had not finished.

`accelerate launch --cpu --num_processes N` starts one process whatever N says (accelerate's multi-CPU
launch is mpirun: huggingface/accelerate#2741); `join` refuses that case with the command that works.
"""

from __future__ import annotations

import atexit
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Iterator, Sequence

import torch

from .errors import PlatonicError
from .launch_env import launch_size, refuse_lost_processes  # noqa: F401 - launch_size re-exported


@dataclass(frozen=True)
class Group:
    """Process `index` of `count` (`local_index` on its node); `device` carries its collectives."""

    index: int = 0
    count: int = 1
    local_index: int = 0
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.index == 0

    @property
    def parallel(self) -> bool:
        return self.count > 1

    def shard(self, n: int) -> slice:
        """This process's contiguous share of n items: [n i / N, n (i + 1) / N)."""
        return slice(n * self.index // self.count, n * (self.index + 1) // self.count)

    def mine(self, items: Sequence, costs: Sequence[float] | None = None) -> list:
        """This process's items: i mod N = its index (round robin), or with `costs`, the longest first to the
        least loaded process (ties: the lower index), the same assignment on every process; in the items' order."""
        if costs is None:
            return [item for i, item in enumerate(items) if i % self.count == self.index]
        loads, owner = [0.0] * self.count, {}
        for i in sorted(range(len(items)), key=lambda i: -costs[i]):
            k = min(range(self.count), key=lambda k: (loads[k], k))
            loads[k] += costs[i]
            owner[i] = k
        return [item for i, item in enumerate(items) if owner[i] == self.index]

    def barrier(self) -> None:
        if self.parallel:
            torch.distributed.barrier()

    def sum_(self, tensors: Sequence[torch.Tensor]) -> None:
        """Replace every tensor by its sum over the processes (one all-reduce of a flat float32 buffer)."""
        if not self.parallel or not tensors:
            return
        flat = torch.cat([t.detach().reshape(-1).float() for t in tensors]).to(self.device)
        torch.distributed.all_reduce(flat)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].reshape(t.shape).to(t.dtype))
            offset += t.numel()

    def sum_gradients(self, params: Sequence[torch.Tensor], loss: torch.Tensor) -> float:
        """After each process's backward on its shard: every gradient summed over the processes (in place), and
        the summed loss returned. Each process's loss is its share (sum over its rows / the global batch), so
        the sum is the global batch's loss and its gradient, as one process would compute it."""
        grads = [p.grad for p in params if p.grad is not None]
        total = loss.detach().reshape(1).float().clone()
        self.sum_([*grads, total])
        return float(total)

    def gather(self, local: torch.Tensor) -> list[torch.Tensor]:
        """Every process's `local` (rows may differ in number, the other dimensions agree), in rank order, on the CPU."""
        if not self.parallel:
            return [local]
        device = torch.device(self.device)
        sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(self.count)]
        torch.distributed.all_gather(sizes, torch.tensor([local.shape[0]], device=device))
        rows = [int(s) for s in sizes]
        padded = torch.zeros((max(rows), *local.shape[1:]), dtype=local.dtype, device=device)
        padded[: local.shape[0]] = local.to(device)
        out = [torch.empty_like(padded) for _ in range(self.count)]
        torch.distributed.all_gather(out, padded)
        return [t[:r].cpu() for t, r in zip(out, rows)]

    def agree(self, value):
        """The main process's `value` on every process (so a cache hit or miss is decided once for all)."""
        if not self.parallel:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def merged(self, mapping: dict) -> dict:
        """The union of every process's `mapping` (picklable values), the same on every process."""
        if not self.parallel:
            return dict(mapping)
        parts: list = [None] * self.count
        torch.distributed.all_gather_object(parts, mapping)
        return {k: v for part in parts for k, v in part.items()}

    def any(self, flag: bool) -> bool:
        """True on every process when `flag` is true on any."""
        if not self.parallel:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        torch.distributed.all_reduce(t)
        return bool(t.item() > 0)


SOLO = Group()
_LAUNCH: list[Group] = []  # the launch's group, once joined
_SOLO_DEPTH = [0]


def join(device="cpu") -> Group:
    """The launch's process group (formed on the first call, through accelerate); `SOLO` without a launch.

    device: where this command runs; the CPU joins over gloo, a GPU over NCCL."""
    refuse_lost_processes()
    if _LAUNCH:
        return _LAUNCH[0]
    if launch_size() == 1:
        return SOLO
    from accelerate import PartialState

    # torch.distributed.nn's functions default to `group=group.WORLD`, evaluated when the module is imported.
    # Imported after the group forms (a transformers model module imports it, through FSDP), they would hold
    # the group for good: destroy_process_group could not free it, and its gloo threads lived on into the
    # interpreter's shutdown, where a process now and then aborted ("terminate called without an active
    # exception") after its work was done. Imported first, the defaults are None.
    import torch.distributed.nn  # noqa: F401

    on_cpu = torch.device(device).type == "cpu"
    # a process may wait long for the others (the main process's report after the jobs): hours, not torch's minutes
    state = PartialState(cpu=on_cpu, timeout=timedelta(seconds=float(os.environ.get("PLATONIC_LAUNCH_TIMEOUT", 86400))))
    comm = "cpu" if on_cpu else str(state.device)
    group = Group(state.process_index, state.num_processes, state.local_process_index, comm)
    _LAUNCH.append(group)
    atexit.register(_leave)
    if not group.is_main:
        os.environ["PLATONIC_QUIET"] = "1"  # one progress bar per launch: the main process's
    return group


def _leave() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def current() -> Group:
    """The group a data-parallel computation shards over: the launch's, or `SOLO` (no launch, or inside a job)."""
    if _SOLO_DEPTH[0] or not _LAUNCH:
        return SOLO
    return _LAUNCH[0]


@contextmanager
def solo() -> Iterator[None]:
    """Inside the block this process computes alone (`current()` is `SOLO`): a job of `spread`."""
    _SOLO_DEPTH[0] += 1
    try:
        yield
    finally:
        _SOLO_DEPTH[0] -= 1


def process_device(device: str) -> str:
    """This process's device: a bare "cuda" becomes cuda:LOCAL_RANK in a launch (one GPU per process)."""
    group = current()
    if group.parallel and str(device) == "cuda":
        return f"cuda:{group.local_index}"
    return str(device)


def on_main(write: Callable[[], object], group: Group | None = None):
    """`write()` on the main process only (the others get None), then every process goes on together; an
    error of the main process is raised there, and the others stop with a one-line error."""
    group = group or current()
    if not group.parallel:
        return write()
    result, error = None, None
    if group.is_main:
        try:
            result = write()
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the others know
            error = exc
    if group.any(error is not None):
        if error is not None:
            raise error
        raise PlatonicError("the main process of this launch failed to write its output (its error is printed above)")
    return result


@dataclass(frozen=True)
class Job:
    """One independent piece of work of a launch: `run()` fills a shared cache; `done()` says it already is;
    `cost` lets `spread` balance the processes (largest first)."""

    name: str
    run: Callable[[], object]
    done: Callable[[], bool] | None = None
    cost: float = 1.0  # what it will take, in any unit shared by the jobs of one spread (e.g. images)


def spread(jobs: Sequence[Job], log: Callable[[str], None] | None = None) -> dict[str, object]:
    """Run the jobs over the processes (each alone, `solo`), then wait for every process: the longest first to
    the least loaded process, by their `cost` (`Group.mine`; equal costs: job i on process i mod N).

    Returns {job name: what its `run()` returned, or "cached" where `done()` said it was done}, merged over
    the processes (the same on each). A job that raises stops the launch on every process once the
    others' jobs end: the failing process re-raises its error, the others say which process failed.
    Without a launch every job runs here, in order.
    """
    group = current()
    say = log or (lambda msg: None)
    results: dict[str, object] = {}
    error: BaseException | None = None
    for job in group.mine(jobs, [job.cost for job in jobs]):
        if job.done is not None and job.done():
            results[job.name] = "cached"
            say(f"process {group.index + 1}/{group.count}: {job.name}: cached")
            continue
        start = time.perf_counter()
        try:
            with solo():
                results[job.name] = job.run()
        except Exception as exc:  # noqa: BLE001 - re-raised below, once every process has stopped
            if not group.parallel:
                raise
            error = exc
            break
        say(f"process {group.index + 1}/{group.count}: {job.name}: {results[job.name] or 'done'} "
            f"in {time.perf_counter() - start:.1f} s")
    if group.any(error is not None):
        if error is not None:
            raise error
        raise PlatonicError("another process of this launch failed (its error is printed above); fix it and launch "
                            "again: finished jobs are kept in the cache")
    return group.merged(results)


__all__ = ["Group", "Job", "SOLO", "current", "join", "launch_size", "on_main", "process_device", "refuse_lost_processes",
           "solo", "spread"]
