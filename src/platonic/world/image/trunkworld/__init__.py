"""The image world on real pretrained trunks (issue 33): three open_clip models on the ImageNet-pretrained
EfficientNet-Lite0 / -Lite1 / -Lite2 trunks that ship in PyPI wheels, the frozen MiniLM text tower, heads
pre-trained LiT-style on cached trunk activations with captions that rarely name the classes, and sources that
fine-tune the trunk's last stage and the head (or LoRA on the last stage) on those activations.

- `recipe`: the models (`OpenClipWorldSpec`s), profiles, the declared recipe and the build directory's key;
- `tower`: a tower cut per family (`TowerCut`: an EfficientNet trunk below its last stage, open_clip's ModifiedResNet
  below layer4): what the build caches and what trains above it;
- `pretrain`: the caption draw and the LiT pre-training of the image head and the text projection;
- `sources`: the per-task fine-tunes on cached activations ("full": last stage + head; "lora": peft on it);
- `pooling`: timm's token attention pool (lite1-attn's head) as pre-training and the sources train through it;
- `build`: the pipeline (data, text features, activations, pre-training, sources), cached by recipe;
- `students`: towers trained from scratch (open_clip's ModifiedResNet), built on request beside the trunk models;
- `shared`, `frozen`: an encoder that computes the part below the cut once; a model frozen below it;
- `backend`: `load_model("world:trunk/NAME[/TASK[/lora]]")`, platonic's open_clip encoder of a built model.

A built model is an open_clip local directory (`open_clip.create_model_and_transforms("local-dir:DIR")`).
"""
