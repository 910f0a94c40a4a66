# ldpsim: every target creates .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# the install's output goes to a log, shown only when a step fails
LOG := $(VENV)/install.log
SHOW_LOG = { cat $(LOG); echo "install failed: the log above is $(LOG)"; exit 1; }
# the checkout on the interpreter's path as well (a .pth entry; the editable install's import
# hook alone comes after the current directory): a folder named ldpsim in the directory Python
# starts from (a clone beside a notebook) cannot shadow the package
CHECKOUT_PTH := $(PY) -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'ldpsim-checkout.pth').write_text('$(CURDIR)\n')"

.PHONY: demo test test-slow bench docs figures lint fmt clean

$(STAMP): pyproject.toml setup.py simulator/codec/_wirec.c protocols/_rngc.c protocols/_prfc.c \
		protocols/_dlapc.c protocols/_b2c.c protocols/_orderedc.c \
		protocols/_safaric.c simulator/session/_netc.c
	$(PYTHON) -m venv $(VENV)
	@echo "installing ldpsim and its tools into $(VENV) (log: $(LOG))"
	@$(PY) -m pip install --quiet --upgrade pip 'setuptools>=77' > $(LOG) 2>&1 || $(SHOW_LOG)
	@$(PY) -m pip install --quiet -e '.[dev,dask]' >> $(LOG) 2>&1 || $(SHOW_LOG)
	@$(CHECKOUT_PTH)
	@touch $(STAMP)

# the benchmark's peers (pyproject's "bench" extra), for ``make bench`` only
$(BENCH_STAMP): $(STAMP)
	@$(PY) -m pip install --quiet -e '.[bench]' > $(LOG) 2>&1 || $(SHOW_LOG)
	@touch $(BENCH_STAMP)

demo: $(STAMP)
	$(VENV)/bin/ldpsim run scenarios/demo.toml --out results/demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(BENCH_STAMP)
	$(VENV)/bin/ldpsim bench

# each family's headline figure in the paper style, into docs/img/*.svg (about 10 min of CPU
# time; the SAFARI figure reads SUSHI from the data folder: ldpsim data)
figures: $(STAMP)
	$(PY) -m ldpsim.simulator.bench.figures

# the documentation site (mkdocs.yml, docs/) into site/; warnings are errors
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(VENV)/bin/ruff check ldpsim simulator protocols tests examples

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix ldpsim simulator protocols tests examples

clean:
	rm -rf $(VENV) results site *.egg-info simulator/*/*.so protocols/*.so
