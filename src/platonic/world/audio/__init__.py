"""The audio world's data (issue 15): real sounds rendered offline from Debian packages.

Modules: `canonical` (16 kHz mono 1 s clips, the resampling helper), `tools` (the Debian programs,
soundfont and voices; the missing-package error), `splits` (disjoint train / val / test units),
`tasks` (tasks, controls, templates, captions), `instruments` (fluidsynth + FluidR3 GM), `speech`
(espeak-ng, flite, festival), `procedural` (beats, noise colours, tempo), `dataset` (profiles, the
whole data set, storage). docs/audio_world.md describes it. The audio world's cache keys are its
declared recipe (`build.data_record`, `build.recipe_record`), not these files.
"""
