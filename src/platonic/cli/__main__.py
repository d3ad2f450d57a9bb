"""`python -m platonic.cli CMD ...`: the `platonic` command, for launchers that start modules.

    accelerate launch --multi_gpu --num_processes 8 -m platonic.cli run recipe.yaml
    torchrun --nproc_per_node 8 -m platonic.cli finetune open_clip:ViT-B-32/laion2b_s34b_b79k --task eurosat -o ft/
"""

from .app import app

if __name__ == "__main__":
    app(prog_name="platonic")
