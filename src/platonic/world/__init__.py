"""The embedded world, a builder only: real small data, a zoo of heterogeneous tiny dual encoders, their sources.

Modules: `data` (tasks, datasets, captions), `text` (the shared frozen sentence encoder), `captions` (the
caption cache both builders write), `nets` (towers and heads), `zoo` (model specs, storage of weights),
`train` (pre-training), `build` (profiles, the cache keyed by the declared recipe; the sources are
`platonic.finetuning.finetune` runs), `backend` (the `world:NAME` loader). What the world does is measured
by the experiment engine (`platonic.experiments.checks`); the `platonic world` commands are in
`platonic.cli.world`.
"""
