# ldpsim: every target creates .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# the checkout on the interpreter's path as well (a .pth entry; the editable install's import
# hook alone comes after the current directory): a folder named ldpsim in the directory Python
# starts from (a clone beside a notebook) cannot shadow the package
CHECKOUT_PTH := $(PY) -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'ldpsim-checkout.pth').write_text('$(CURDIR)\n')"

.PHONY: demo test test-slow bench docs lint fmt clean

$(STAMP): pyproject.toml simulator/codec/_wirec.c protocols/_rngc.c protocols/_prfc.c \
		protocols/_dlapc.c protocols/_b2c.c protocols/_orderedc.c \
		protocols/_safaric.c simulator/session/_netc.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,dask]'
	$(CHECKOUT_PTH)
	touch $(STAMP)

# the benchmark's peers (pyproject's "bench" extra), for ``make bench`` only
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(VENV)/bin/ldpsim run scenarios/demo.toml --out results/demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(BENCH_STAMP)
	$(VENV)/bin/ldpsim bench

# the documentation site (mkdocs.yml, docs/) into site/; warnings are errors
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(VENV)/bin/ruff check ldpsim simulator protocols tests examples

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix ldpsim simulator protocols tests examples

clean:
	rm -rf $(VENV) results site *.egg-info simulator/*/*.so protocols/*.so
