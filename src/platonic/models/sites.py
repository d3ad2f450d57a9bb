"""Where an edit lands in each architecture family: a table of rules, not an if-chain.

A `SiteRule` names a module path inside the model, the site type it maps to, and the paths that
must be pass-through (Identity, Dropout, an empty Sequential) for that module to be the *last* map
onto the embedding space. `discover_site` takes the first rule that matches. The rules are checked
numerically on every buildable open_clip architecture by `benchmarks/sweep_edit_sites.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from ..edit import EditSite, HeadAffineSite, LinearSite, ProjectionParameter
from ..errors import EditSiteError

PASS_THROUGH = (nn.Identity, nn.Dropout, nn.Flatten)


@dataclass(frozen=True)
class SiteRule:
    """`path` (dotted, from the model root) maps to `site`; `pass_through` paths must do nothing."""

    family: str
    path: str
    site: type[EditSite]
    pass_through: tuple[str, ...] = field(default_factory=tuple)


# open_clip: CLIP / CustomTextCLIP / CoCa, image tower at `visual`
OPEN_CLIP_RULES = (
    SiteRule("open_clip VisionTransformer (x @ proj)", "visual.proj", ProjectionParameter),
    SiteRule("open_clip ModifiedResNet (attention-pool output projection)", "visual.attnpool.c_proj", LinearSite),
    SiteRule("timm tower with linear projection head (ConvNeXt, ViTamin, Swin, timm ViT)", "visual.head.proj", LinearSite),
    SiteRule("timm tower with MLP projection head", "visual.head.mlp.fc2", LinearSite),
    SiteRule("timm tower whose classifier is the embedding (EVA, PE-Core)", "visual.trunk.head", LinearSite,
             ("visual.head", "visual.trunk.head_drop")),
    SiteRule("timm tower with pooled classifier head (MobileCLIP/FastViT)", "visual.trunk.head.fc", LinearSite,
             ("visual.head", "visual.trunk.head.flatten", "visual.trunk.head.drop")),
    SiteRule("timm tower ending in a residual attention-pooling head (SigLIP, SigLIP2)",
             "visual.trunk.attn_pool.mlp.fc2", HeadAffineSite,
             ("visual.head", "visual.trunk.head", "visual.trunk.fc_norm", "visual.trunk.head_drop",
              "visual.trunk.attn_pool.mlp.drop2")),
    SiteRule("timm convnet with an attention-pool head and no projection (timm_pool abs_attn / rot_attn)",
             "visual.head.pool.proj", LinearSite, ("visual.head.drop", "visual.head.proj", "visual.head.mlp")),
    SiteRule("timm tower whose `classifier` is the embedding (EfficientNet, MobileNet; timm_proj '')",
             "visual.trunk.classifier", LinearSite, ("visual.head",)),
)

# transformers: CLIPModel, SiglipModel, Siglip2Model, ClapModel
HF_RULES = (
    SiteRule("transformers CLIP (visual_projection)", "visual_projection", LinearSite),
    SiteRule("transformers SigLIP / SigLIP2 (residual attention-pooling head)", "vision_model.head.mlp.fc2", HeadAffineSite),
    SiteRule("transformers CLAP (audio projection, last Linear)", "audio_projection.linear2", LinearSite),
)


def resolve(root: nn.Module, path: str):
    """The attribute at dotted `path` below `root`, or None."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _passes_through(module) -> bool:
    if module is None or isinstance(module, PASS_THROUGH):
        return True
    return isinstance(module, nn.Sequential) and all(isinstance(m, PASS_THROUGH) for m in module)


def _build(root: nn.Module, rule: SiteRule) -> EditSite | None:
    parent_path, _, name = rule.path.rpartition(".")
    return rule.site.at(resolve(root, parent_path) if parent_path else root, name, resolve(root, rule.path))


def discover_site(root: nn.Module, rules=OPEN_CLIP_RULES) -> tuple[EditSite, SiteRule]:
    """The edit site of `root` by the first matching rule; raises EditSiteError naming what was found."""
    for rule in rules:
        if not all(_passes_through(resolve(root, p)) for p in rule.pass_through):
            continue
        site = _build(root, rule)
        if site is not None:
            return site, rule
    raise EditSiteError(
        f"no known edit site in {type(root).__name__}: its tower ends in {describe_tail(root)}. "
        "Pass edit_site='append' to load_model to append a d x d linear after the tower "
        "(exact, adds d^2 parameters), or report the architecture so a rule can be added."
    )


def describe_tail(root: nn.Module, n: int = 4) -> str:
    """The last few named modules of the image tower, for error messages: open_clip's `visual` where the model
    has one (its text tower comes after it in the module order), else the whole model."""
    visual = getattr(root, "visual", None)
    tower, prefix = (visual, "visual.") if isinstance(visual, nn.Module) else (root, "")
    names = [f"{prefix}{name} ({type(m).__name__})" for name, m in tower.named_modules() if name][-n:]
    return ", ".join(names) or type(root).__name__
