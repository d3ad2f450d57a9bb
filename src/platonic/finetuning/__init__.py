"""Fine-tuning: making the sources platonic measures, and reading the fine-tunes people already have.

- `training`: `finetune` (a dual encoder's image / audio tower against its frozen prompt head, with
  OrthoReg and a replay term), `FinetuneConfig`, `orthoreg_penalty`, `GRADIENT_ASCENT`;
- `attention`, `lora`, `linearize`: which weights an ATT-FT, LoRA(-ATT) or tangent fine-tune trains;
- `output`: `platonic finetune`'s directories (a peft adapter or a state dict, with finetune.json);
- `sources`: any fine-tune a user names (state dicts, peft adapters, transformers vision-only
  checkpoints, hub names) loaded onto its pre-trained model (`load_finetuned`);
- `checkpoints`: weights files read without unpickling; `convert_pickled` for the rest.
"""

from .checkpoints import convert_pickled, is_converted_file, read_state_dict
from .linearize import LinearizedEncoder, linearisable_names, tangent_forward
from .output import MODES, finetune_on_task, is_finetune_directory, write_finetune
from .sources import STATE_DICT_FILE, load_finetuned, require_exists, require_pinned
from .training import GRADIENT_ASCENT, FinetuneConfig, finetune, orthoreg_penalty, trainable_parameters

__all__ = ["GRADIENT_ASCENT", "MODES", "STATE_DICT_FILE", "FinetuneConfig", "LinearizedEncoder", "convert_pickled",
           "finetune", "finetune_on_task", "is_converted_file", "is_finetune_directory", "linearisable_names",
           "load_finetuned", "orthoreg_penalty", "read_state_dict", "require_exists", "require_pinned", "tangent_forward",
           "trainable_parameters", "write_finetune"]
