"""The image world: tasks and controls (`tasks`), their data (`data`, with `splits`, `glyphs`, `icons`,
`procedural`), the zoo (`nets`, `zoo`), pre-training (`train`), the build and its cache (`build`), the
loader of `world:NAME` models (`backend`), and the ImageNet-pretrained trunks that ship in PyPI wheels
(`trunks`). docs/world.md describes it."""
