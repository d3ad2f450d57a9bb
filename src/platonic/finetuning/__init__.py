"""Fine-tuning: making the sources platonic measures, and reading the fine-tunes people already have.

- `config`: `FinetuneConfig`, `GRADIENT_ASCENT` (torch-free: the command line checks options first);
- `training`: `finetune` (a dual encoder's image / audio tower against its frozen prompt head, with
  OrthoReg and a replay term), `orthoreg_penalty`;
- `attention`, `lora`, `linearize`: which weights an ATT-FT, LoRA(-ATT) or tangent fine-tune trains;
- `output`: `platonic finetune`'s directories (a peft adapter or a state dict, with finetune.json);
- `naming`: what a source's text names (hub revisions, pinning, a missing path), torch-free;
- `sources`: any fine-tune a user names (state dicts, peft adapters, transformers vision-only
  checkpoints, hub names) loaded onto its pre-trained model (`load_finetuned`);
- `checkpoints`: weights files read without unpickling; `convert_pickled` for the rest.
"""

from ..lazy import lazy_exports

# each public name from its module, imported on first use (`platonic.lazy`): the command line checks a
# source's name (`naming`) without importing torch
_MODULES = {
    **dict.fromkeys(("convert_pickled", "is_converted_file", "read_state_dict"), "checkpoints"),
    **dict.fromkeys(("LinearizedEncoder", "linearisable_names", "tangent_forward"), "linearize"),
    **dict.fromkeys(("finetune_on_task", "is_finetune_directory", "train_split", "write_finetune"), "output"),
    **dict.fromkeys(("STATE_DICT_FILE", "load_finetuned"), "sources"),
    **dict.fromkeys(("require_exists", "require_pinned"), "naming"),
    **dict.fromkeys(("GRADIENT_ASCENT", "MODES", "FinetuneConfig"), "config"),
    **dict.fromkeys(("finetune", "orthoreg_penalty", "trainable_parameters"), "training"),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = sorted(_MODULES)
