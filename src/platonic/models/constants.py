"""Constants the backends share: the per-channel image normalisations their checkpoints were trained with.

An image x in [0, 1] (C, H, W) enters a tower as (x - mean) / std, channel by channel.
"""

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's (R, G, B) mean; open_clip's OPENAI_DATASET_MEAN
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)  # CLIP's (R, G, B) std; open_clip's OPENAI_DATASET_STD
HALF = (0.5, 0.5, 0.5)  # SigLIP's mean and std: x in [0, 1] -> [-1, 1]
