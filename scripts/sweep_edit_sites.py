"""Fold a random operator into every open_clip architecture that fits the CPU budget; print coverage.

Budget rule: an architecture is swept when its model (both towers) has at most --max-params parameters
(default 450 M), counted on torch's meta device without allocating memory, and its config builds
offline (some text towers need a Hugging Face download and are reported as "needs network").
For each swept model: random weights, 3 random canonical probes, a random operator (or head update)
folded at alpha = 0.5; the embeddings must match the prediction to 1e-4 relative, and unfold must
restore them bit for bit.

    python scripts/sweep_edit_sites.py [--max-params 450e6] [--only NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # "builds offline" means exactly that


def param_count_on_meta(arch: str) -> int:
    import open_clip

    with torch.device("meta"):
        model = open_clip.create_model(arch, pretrained=None, device="meta")
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    import open_clip

    from platonic.models import load_model
    from platonic.verify import check_fold

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-params", type=float, default=450e6)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    probes = torch.randint(0, 256, (3, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    listed = open_clip.list_models()
    rows = []
    for arch in args.only or listed:
        row = {"arch": arch}
        t0 = time.perf_counter()
        try:
            row["params_M"] = round(param_count_on_meta(arch) / 1e6, 1)
        except Exception as exc:  # noqa: BLE001 - reported per architecture
            row["status"] = "needs network" if "huggingface" in str(exc).lower() or "connect" in str(exc).lower() else f"does not build: {type(exc).__name__}"
            rows.append(row)
            print(f"{arch:40s} {row['status']}", flush=True)
            continue
        if row["params_M"] > args.max_params / 1e6:
            row["status"] = "over budget"
        else:
            try:
                model = load_model(f"open_clip:{arch}")
                check = check_fold(model, probes)
                row.update(family=model.site_rule.family if model.site_rule else "appended", site=model.edit_site.describe(),
                           rel_error=check.rel_error, restored=check.restored_exactly,
                           status="exact" if check.ok() else "NOT EXACT")
                del model
            except Exception as exc:  # noqa: BLE001
                row["status"] = f"error: {type(exc).__name__}: {str(exc)[:160]}"
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"{arch:40s} {row.get('params_M', '?'):>8} M  {row['status']:12s} {row.get('site', '')} "
              f"{row.get('rel_error', ''):} {row.get('family', '')}", flush=True)
    exact = [r for r in rows if r["status"] == "exact"]
    families = sorted({r["family"] for r in exact})
    print(f"\ncoverage: {len(families)} families covered / {len(exact)} architectures covered / {len(rows)} architectures listed")
    print(f"  over budget: {sum(r['status'] == 'over budget' for r in rows)}, needs network: "
          f"{sum(r['status'] == 'needs network' for r in rows)}, failed: "
          f"{sum(r['status'] not in ('exact', 'over budget', 'needs network') for r in rows)}")
    for fam in families:
        print(f"  {fam}: {sum(r.get('family') == fam for r in exact)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
