# tcx developer entry points. `make demo` and `make test` work on a fresh machine.
VENV       ?= .venv
PY         := $(VENV)/bin/python
# The CPU build of torch; the package itself accepts any torch >= its minimum.
TORCH_PIN  ?= torch==2.13.0
STAMP      := $(VENV)/.installed

.PHONY: help setup demo test test-fast lint format bench clean

help:  ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_PIN)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[torch,dev,cuda-preview]"
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the CPU build of torch and tcx (editable)

demo: $(STAMP)  ## explain the graph breaks of the bundled example
	$(VENV)/bin/tcx explain fixtures/programs/demo.py

# The suite keeps Python's bytecode between its processes (and pytest's rewritten test modules): with
# PYTHONDONTWRITEBYTECODE set, as on some machines, every tcx subprocess would compile tcx again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n 2 -q --durations=20

test: $(STAMP)  ## run the whole test suite (real torch.compile runs on the CPU; goal: 10 minutes on 2 cores)
	@$(PY) -m compileall -q tcx cli core renderers tui >/dev/null
	$(PYTEST)

test-fast: $(STAMP)  ## the inner loop: unit tests, saved recordings and logs, one live run, no fuzzer, no nested pytest (goal: 90 s)
	@$(PY) -m compileall -q tcx cli core renderers tui >/dev/null
	$(PYTEST) -m "not (torch or fuzz or nested) or smoke"

# mypy sees the installed layout (tcx.core = core/, ...): a tree of links made for it.
MYPY_LAYOUT := .mypy-layout
STRICT      := tcx.core.budgets tcx.core.ingest tcx.core.model tcx.core.analysis tcx.core.selection tcx.core.views tcx.renderers

lint: $(STAMP)  ## ruff lint + format check, mypy (strict) on the readers, model, analyses, selection, views, renderers; the docs site
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	rm -rf $(MYPY_LAYOUT) && mkdir -p $(MYPY_LAYOUT)/tcx
	for f in tcx/*.py; do ln -s $(CURDIR)/$$f $(MYPY_LAYOUT)/tcx/; done
	for d in cli core renderers tui; do ln -s $(CURDIR)/$$d $(MYPY_LAYOUT)/tcx/$$d; done
	cd $(MYPY_LAYOUT) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml $(addprefix -p ,$(STRICT))
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet -d site

format: $(STAMP)  ## apply ruff formatting and safe fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)  ## speed goals as ratios, side by side (median of several runs)
	$(PY) bench/bench.py

clean:  ## remove the environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
