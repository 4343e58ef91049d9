#!/usr/bin/env bash
# The scale-out check on a CUDA machine, within BUDGET_S seconds in all (default 480, installs
# included); prints one JSON line (bench/gpu_check.py, which gets this script's arguments).
#
# It uses the machine's Python and torch (PYTHON, default python3) and installs only what is
# missing: from WHEELS=DIR when that is set (a folder of wheels, installed with `pip install
# --no-index --find-links DIR`: for machines without network), else from the package registry.
# - veriloop and its requirements, when veriloop does not import (the machine's torch is kept when
#   it satisfies the project's range); when that fails, src/ is used with what is installed.
# - vLLM (VLLM_SPEC, default vllm), when it does not import and WHEELS or VLLM_SPEC is set: into a
#   virtual environment that sees the machine's packages ($TMPDIR/veriloop-gpu-check-vllm, kept
#   for the next run), since vLLM pins a torch of its own and the other parts keep the machine's.
#   Otherwise, or when the install fails, the vllm parts report why they were skipped.
# A folder for a machine without network, made on one with it for the same Python and platform:
#   pip download -d DIR setuptools wheel . vllm==0.32.0
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${BUDGET_S:-480}
PY=${PYTHON:-python3}
source=()
[ -n "${WHEELS:-}" ] && source=(--no-index --find-links "$WHEELS")
left() { echo $((budget - SECONDS)); } # SECONDS: since this script started

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo '{"bench": "gpu_check", "skipped": "no CUDA device for this Python'"'"'s torch"}'; exit 0; }

if ! "$PY" -c "import veriloop" 2>/dev/null; then
  timeout $(($(left) / 3)) "$PY" -m pip install -q "${source[@]}" -e . >&2 ||
    { echo "could not install veriloop's requirements${WHEELS:+ from $WHEELS}: using src/ with what is installed" >&2
      export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"; }
fi

# The vllm parts' Python, or why they are skipped.
venv="${TMPDIR:-/tmp}/veriloop-gpu-check-vllm"
spec=${VLLM_SPEC:-vllm}
if "$PY" -c "import vllm" 2>/dev/null; then
  vllm=(--vllm-python "$PY")
elif "$venv/bin/python" -c "import vllm" 2>/dev/null; then
  vllm=(--vllm-python "$venv/bin/python")
elif [ -z "${WHEELS:-}${VLLM_SPEC:-}" ]; then
  vllm=(--vllm-skip "vllm does not import in $PY, and neither WHEELS (a folder of wheels holding vllm, for machines without network) nor VLLM_SPEC (e.g. vllm==0.32.0, from the package registry) was set to install it")
else
  # --without-pip: the machine's pip, seen through its site-packages, installs into the environment.
  install_s=$(($(left) / 2))
  if ! made=$("$PY" -m venv --system-site-packages --without-pip "$venv" 2>&1); then
    vllm=(--vllm-skip "could not make a virtual environment for vLLM at $venv: $(tail -n 1 <<<"$made")")
  elif ! log=$(timeout "$install_s" "$venv/bin/python" -m pip install -q "${source[@]}" "$spec" 2>&1); then
    why=$(grep -v '^\s*$' <<<"$log" | tail -n 1)
    vllm=(--vllm-skip "could not install $spec${WHEELS:+ from $WHEELS} within $install_s s: ${why:-pip was stopped}")
  elif ! log=$("$venv/bin/python" -c "import vllm" 2>&1); then
    vllm=(--vllm-skip "$spec was installed at $venv but does not import: $(tail -n 1 <<<"$log")")
  else
    vllm=(--vllm-python "$venv/bin/python")
  fi
fi

check_s=$(left)
((check_s >= 40)) || check_s=40 # installs took the budget: the parts still get a short try
# The last JSON line needs a moment after the last part.
exec timeout "$check_s" "$PY" bench/gpu_check.py --total-timeout-s "$((check_s - 10))" "${vllm[@]}" "$@"
