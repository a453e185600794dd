# make book   build the book into _build/html (sets up .venv on first use)
# make test   run every test: reference, exercises, generator, notebooks (sets up .venv on first use)
# make assign regenerate book/ from solutions/
# Override the environment's location with VENV=path (CI uses a fresh one).

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup book test assign clean

setup: $(STAMP)

# torch==2.13.0 first: on a machine without a GPU this takes the CPU wheel; a plain `torch`
# from requirements.txt alone could pull several GB of CUDA packages.
$(STAMP): requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build -W -n --keep-going .
	@echo "The book is at _build/html/index.html"

test: $(STAMP)
	$(PY) -m pytest

assign: $(STAMP)
	$(PY) -m mhsa_ref.assign

clean:
	rm -rf _build
