"""The embedded world: real small data, a zoo of heterogeneous tiny dual encoders, fine-tuned sources.

Modules: `data` (tasks, datasets, probes, captions), `text` (the shared frozen sentence encoder),
`nets` (towers and heads), `zoo` (model specs, the `world:NAME` backend), `train` (pre-training,
fine-tuning, accuracy), `measure` (descriptor agreement, oracle closed form), `build` (profiles,
cache, report), `cli` (the `platonic world` commands).
"""
