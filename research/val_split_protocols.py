"""Research harness (not part of the package, not tested): run `platonic experiment ...` on a world whose tasks and
controls are evaluated on their *validation* splits instead of their test splits, so that a setting (the anchored
solve's --anchor-weight, say) can be chosen without looking at a test split.

It replaces `image_world_sets` in the trunk world's and the tiny-tower world's setups (in this process only) by one
that hands each task's val split as its test set and each control's val split as the control; everything else
(probes from train, sources, the protocols, the tables) is the command's own. The tables' "test" columns then hold
val-split accuracies; say so wherever they are quoted.

Usage: python research/val_split_protocols.py EXPERIMENT_ARGS...
  e.g. python research/val_split_protocols.py addition negation --setup trunk-world --solve anchored \
       --anchor-weight 2 --no-plots -o /tmp/val-w2
"""
import sys

from platonic.cli.app import app
from platonic.experiments.engine import EvalSet, TaskSpec
from platonic.experiments.setups import trunk_world, world
from platonic.world.image import data as world_data


def val_sets(data: dict) -> tuple[dict, dict]:
    """(tasks, controls) as `image_world_sets` gives them, each evaluated on its val split."""
    tasks = {}
    for name in world_data.TASK_NAMES:
        d, prompts = data[name], tuple(world_data.TASKS[name].prompts)
        val = EvalSet(name, d.val.images, d.val.labels, prompts)
        tasks[name] = TaskSpec(name, prompts, d.probes, val, EvalSet(f"{name}/val", d.val.images, d.val.labels, prompts))
    controls = {name: EvalSet(name, data[name].val.images, data[name].val.labels, tuple(world_data.CONTROLS[name].prompts))
                for name in world_data.CONTROLS if name in data}
    return tasks, controls


if __name__ == "__main__":
    trunk_world.image_world_sets = val_sets
    world.image_world_sets = val_sets
    app(["experiment", *sys.argv[1:]])
