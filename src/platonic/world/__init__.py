"""The embedded worlds, builders only: real small data, zoos of heterogeneous tiny dual encoders, their sources.

- `image/`: the image world (tasks, data, zoo, pre-training, build, the `world:NAME` loader);
- `audio/`: the audio world (sounds rendered from Debian packages, its zoo and build, `world:audio/NAME`);
- `common/`: what both share (the frozen MiniLM text encoder and caption cache, heads, layers, losses,
  weights storage, build jobs); `image/` and `audio/` import it and nothing of each other;
- `backend`: the `world:` model backend, registered through the `platonic.backends` entry point.

Each world's cache key is its declared recipe (`image.build.recipe_record`, `audio.build.recipe_record`);
the sources are `platonic.finetuning.finetune` runs. What the worlds do is measured by the experiment
engine (`platonic.experiments.checks`); the `platonic world` commands are in `platonic.cli.world`.
"""
