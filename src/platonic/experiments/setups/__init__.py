"""What experiments run on: one registry of named setups (`SETUPS`), and setups of the user's own models.

- `world`, `audio_world`: the embedded worlds as `ExperimentSetup`s (built on first use);
- `toy`: a synthetic setup of real `DualEncoder`s, for tests (seconds);
- `schema` (the YAML file's pydantic schema and path checks), `data` (decoding the data it names),
  `yaml` (`config_setup`: models, data, sources and descriptors -> `ExperimentSetup`);
- `labelled`: the task-arithmetic benchmark's setup (every task with train / val / test splits).

`load_setup(name, ...)` resolves a setup name, a YAML file, or command-line model / task / source options.
"""

from .audio_world import AudioWorldParts, audio_world_parts, audio_world_setup
from .data import input_form, open_data_set, read_control, read_data, read_task, read_test_split
from .labelled import (
    Control,
    LabelledTask,
    TaskArithmeticSetup,
    config_ta_setup,
    labelled_setup,
    split_control,
    world_ta_setup,
)
from .registry import SETUPS, WORLD_SETUPS, SetupEntry, check_device, load_setup, world_grid, world_slice
from .schema import (
    DataSetConfig,
    ExperimentConfig,
    check_files,
    check_task_finetunes,
    config_from_options,
    read_config,
    read_yaml,
    resolve_paths,
    task_finetune,
)
from .toy import ToyDualEncoder, toy_setup
from .trunk_world import TrunkWorldParts, trunk_world_parts, trunk_world_setup
from .world import (
    DEFAULT_SOURCE_KIND,
    WorldParts,
    ascended,
    parts_setup,
    world_data,
    world_parts,
    world_setup,
    world_sources,
)
from .yaml import config_setup, made_source, train_digest

__all__ = ["DEFAULT_SOURCE_KIND", "SETUPS", "WORLD_SETUPS", "AudioWorldParts", "Control", "DataSetConfig",
           "ExperimentConfig", "LabelledTask", "SetupEntry", "TaskArithmeticSetup", "ToyDualEncoder", "WorldParts",
           "ascended", "audio_world_parts", "audio_world_setup", "check_device", "check_files", "check_task_finetunes", "config_from_options",
           "config_setup", "config_ta_setup", "input_form", "labelled_setup", "load_setup", "made_source", "open_data_set", "parts_setup",
           "read_config", "read_control", "read_data", "read_task", "read_test_split", "read_yaml", "resolve_paths",
           "split_control", "task_finetune", "toy_setup", "TrunkWorldParts", "trunk_world_parts", "trunk_world_setup", "train_digest", "world_data", "world_grid", "world_parts",
           "world_setup", "world_slice", "world_sources", "world_ta_setup"]
