#!/usr/bin/env bash
# The GPU check of issue 36 (docs/scale.md): finetune -> measure -> solve -> apply (closed form and adapter)
# -> export -> reload, on a random-weight open_clip ViT-B-32 and a random-weight transformers SigLIP base,
# in float32 and in bfloat16 autocast, with throughput and peak GPU memory of every stage side by side.
# Exits non-zero on any mismatch beyond the tolerances printed in scripts/gpu_check.py's docstring.
# Needs no network: the models are built from their configs and the data is synthetic.
#
#   scripts/gpu_check.sh                 # on cuda:0, the defaults (20 steps of 64, 512 train images)
#   scripts/gpu_check.sh --steps 50      # more steps; any option of scripts/gpu_check.py
#   DEVICE=cuda:1 scripts/gpu_check.sh   # another GPU
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: torch sees no CUDA GPU here; this check is for a machine with one" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PLATONIC_CACHE="${PLATONIC_CACHE:-$(mktemp -d)}"
export PLATONIC_QUIET=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$PYTHON" scripts/gpu_check.py --device "${DEVICE:-cuda}" "$@"
