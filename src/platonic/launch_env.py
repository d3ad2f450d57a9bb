"""What a launcher's environment says about the processes it started, read without importing torch.

The command line checks it before any other work (`platonic.cli.common.check_compute`), and
`platonic.distributed.join` again when it forms the process group.
"""

from __future__ import annotations

import os

from .errors import InvalidInputError


def launch_size() -> int:
    """How many processes the launcher started (WORLD_SIZE, set by torchrun and accelerate; 1 without one)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def refuse_lost_processes() -> None:
    """Refuse `accelerate launch --cpu --num_processes N` (N > 1), which starts a single process."""
    cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("true", "1")
    if cpu and "MASTER_ADDR" in os.environ and launch_size() == 1 and "LOCAL_RANK" not in os.environ:
        raise InvalidInputError("accelerate launch --cpu starts one process whatever --num_processes says (its multi-CPU "
                                "launch is mpirun, huggingface/accelerate#2741); for N CPU processes run `accelerate "
                                "launch --multi_gpu --num_processes N -m platonic.cli ... --device cpu` (or torchrun)")
