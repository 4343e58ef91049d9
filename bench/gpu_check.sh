#!/usr/bin/env bash
# The scale-out check on a CUDA machine, in at most 8 minutes; prints one JSON line (bench/gpu_check.py).
# It uses the machine's Python and torch (PYTHON, default python3); veriloop's other needs are
# installed from the package registry when veriloop does not import (the machine's torch is kept
# when it satisfies the project's range). vLLM is installed only when VLLM_SPEC names it (e.g.
# VLLM_SPEC=vllm==0.32.0; it pins a torch of its own); without it the vLLM part reports why it
# was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo '{"bench": "gpu_check", "skipped": "no CUDA device for this Python'"'"'s torch"}'; exit 0; }
"$PY" -c "import veriloop" 2>/dev/null || timeout 180 "$PY" -m pip install -q -e . >&2 ||
  { echo "could not install veriloop's requirements: using src/ with what is installed" >&2;
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"; }
if [ -n "${VLLM_SPEC:-}" ] && ! "$PY" -c "import vllm" 2>/dev/null; then
  timeout 180 "$PY" -m pip install -q "$VLLM_SPEC" >&2 || echo "could not install $VLLM_SPEC" >&2
fi
exec timeout 420 "$PY" bench/gpu_check.py "$@"
