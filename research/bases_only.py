"""Research harness (not part of the package, not tested): the world's data, caption cache and six
pre-trained models, without its sources, for the one-model scratch worlds (`one_model_world.py`,
`base_from=`, `PLATONIC_RESEARCH_WORLD=`).

It calls the build's own jobs (`build.job_pretrain`, the same seeds), so its bases are the built
world's, bit for bit on one machine, in the pre-training's share of a build (9 of its 24-41 minutes here). It writes no COMPLETE
marker, so nothing takes the directory for a built world.
Usage: python research/bases_only.py DIR [WORKERS]
(The work sits under `if __name__ == "__main__"`: the build's workers start from a fork server, which
re-imports this script.)
"""
import sys, time, json
from pathlib import Path
from concurrent.futures import as_completed
from platonic.world.image import build as B, data as D
from platonic.world.image.zoo import MODEL_NAMES

if __name__ == "__main__":
    out = Path(sys.argv[1]); workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    t0 = time.time()
    if not ((out / "data.safetensors").exists() and (out / "captions.safetensors").exists()):
        D.require_debian_data()
        B.write_world_inputs(out, "full", 0, progress=False)  # the build's own step, so the bases cannot drift from it
    print(f"data and captions {time.time() - t0:.0f} s", flush=True)
    todo = [m for m in MODEL_NAMES if not (out / "models" / m / "base.safetensors").exists()]
    with B.worker_pool(workers) as pool:
        futs = [pool.submit(B.job_pretrain, str(out), "full", 0, m) for m in todo]
        for f in as_completed(futs):
            r = f.result()
            print(json.dumps({"model": r["model"], "seconds": round(r["seconds"])}), flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)
