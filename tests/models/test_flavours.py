"""Fine-tuning flavours on real architectures: ATT-FT trains exactly the attention weight matrices,
LoRA-ATT wraps q, k, v and the output projection, OrthoReg sees exactly the trained 2-D tensors."""

import pytest
import torch

from platonic import InvalidInputError
from platonic.finetuning.attention import attention_lora_modules, attention_weight_names
from platonic.finetuning import FinetuneConfig, finetune, trainable_parameters

from tiny_models import get_model


def _vision_tower(**kw):
    from open_clip.model import CLIPVisionCfg, _build_vision_tower

    torch.manual_seed(0)
    return _build_vision_tower(32, CLIPVisionCfg(**kw))


def test_attft_on_open_clip_vit_b32_is_in_proj_and_out_proj_weights_of_each_block():
    import open_clip

    model = open_clip.create_model("ViT-B-32", pretrained=None)
    expected = [f"transformer.resblocks.{i}.attn.{w}" for i in range(12) for w in ("in_proj_weight", "out_proj.weight")]
    assert attention_weight_names(model.visual) == expected
    assert attention_lora_modules(model.visual) == [f"transformer.resblocks.{i}.attn" for i in range(12)]


def test_attft_skips_open_clip_attentional_pooler_and_refuses_a_resnet_attention_pool():
    tower = _vision_tower(layers=2, width=32, head_width=16, patch_size=8, image_size=32, attentional_pool=True)
    assert attention_weight_names(tower) == [
        "transformer.resblocks.0.attn.in_proj_weight", "transformer.resblocks.0.attn.out_proj.weight",
        "transformer.resblocks.1.attn.in_proj_weight", "transformer.resblocks.1.attn.out_proj.weight"]  # no attn_pool.*
    resnet = _vision_tower(layers=(1, 1, 1, 1), width=16, image_size=64)  # ModifiedResNet: attnpool.{q,k,v,c}_proj
    with pytest.raises(InvalidInputError, match="no transformer attention layers.*full or linear"):
        attention_weight_names(resnet, "open_clip:RN")
    with pytest.raises(InvalidInputError, match="no transformer attention layers"):
        attention_lora_modules(resnet)


def test_attft_on_transformers_clip_names_and_trains_exactly_q_k_v_out_weights():
    model = get_model("hf:tiny-clip")
    expected = [f"encoder.layers.{i}.self_attn.{p}_proj.weight" for i in range(2) for p in ("q", "k", "v", "out")]
    assert [n for n, _ in trainable_parameters(model, "attention")] == expected  # no biases, no visual_projection
    tower_names = dict(model.tower.named_parameters())
    assert attention_weight_names(model.tower) == expected and all(n in tower_names for n in expected)
    probes = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(8) % 2
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    ft, _ = finetune(model, probes, labels, ["a cat", "a dog"], FinetuneConfig(mode="attention", steps=2, batch_size=4, lr=1e-2,
                                                                                 weight_decay=0.0), progress=False)
    after = ft.module.state_dict()
    changed = sorted(k for k in before if not torch.equal(before[k], after[k]))
    assert changed == sorted(f"vision_model.{n}" for n in expected)


def test_lora_att_wraps_q_k_v_out_and_orthoreg_sees_scaled_BA_of_each():
    model = get_model("hf:tiny-clip")
    assert attention_lora_modules(model.tower) == [f"encoder.layers.{i}.self_attn.{p}_proj" for i in range(2)
                                                   for p in ("q", "k", "v", "out")]
    from platonic.finetuning.lora import attach_lora, lora_weight_deltas

    ft = model.copy_for_new_weights()
    attach_lora(ft.tower, attention_lora_modules(ft.tower), 4, 8.0, ft.spec, seed=0)
    deltas = lora_weight_deltas(ft.tower)
    assert len(deltas) == 8 and all(d.shape == (32, 32) for d in deltas)  # one (alpha/r) B A per projection
    probes = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    out, _ = finetune(model, probes, torch.arange(8) % 2, ["a cat", "a dog"],
                      FinetuneConfig(mode="lora", lora_targets="attention", steps=2, batch_size=4, lr=1e-2, orthoreg=1.0),
                      progress=False)
    after = out.module.state_dict()
    changed = sorted(k for k in before if not torch.equal(before[k], after[k]))
    assert changed == sorted(f"vision_model.encoder.layers.{i}.self_attn.{p}_proj.weight" for i in range(2)
                             for p in ("q", "k", "v", "out"))


def test_world_vit_attft_excludes_nothing_but_its_blocks_and_map_vit_skips_its_pooling_head():
    from platonic.world.image.zoo import SPECS, WorldModel, build_module

    vit = WorldModel(SPECS["vit-a"], build_module(SPECS["vit-a"], 0))
    assert [n for n, _ in trainable_parameters(vit, "attention")] == [f"blocks.{i}.attn.{p}_proj.weight" for i in range(4)
                                                            for p in ("q", "k", "v", "out")]
    map_vit = WorldModel(SPECS["map-vit"], build_module(SPECS["map-vit"], 0))
    names = [n for n, _ in trainable_parameters(map_vit, "attention")]
    assert names == [f"blocks.{i}.attn.{p}_proj.weight" for i in range(3) for p in ("q", "k", "v", "out")]  # not head.attn
    for name in ("resnet", "convnext", "mixer"):
        model = WorldModel(SPECS[name], build_module(SPECS[name], 0))
        with pytest.raises(InvalidInputError, match="no transformer attention layers"):
            trainable_parameters(model, "attention")
