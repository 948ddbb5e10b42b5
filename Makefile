# The two commands of the README: `make demo` and `make test`. Both set everything up first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
SHARED ?= $(abspath ../shared)
RUST_SRC := $(shell find src -name '*.rs') Cargo.toml
PY_SRC   := $(shell find python -name '*.py') pyproject.toml
DEB_PKGS := strace sqlite3 postgresql fio blktrace chromium

.PHONY: setup sysdeps build test lint demo bench clean

# Debian packages the tests drive for real (strace capture, SQLite, PostgreSQL, fio, blkparse,
# and chromium, headless, for the report's browser test).
# Installed when running as root on a machine that lacks them; otherwise just checked.
sysdeps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else echo "missing Debian packages (install them as root):$$missing"; exit 1; fi; \
	fi

$(VENV)/.deps: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2"
	touch $@

# maturin develop builds the Rust core in release mode and installs the package editable,
# with its dependencies and the test extras.
$(VENV)/.built: $(VENV)/.deps $(RUST_SRC) pyproject.toml
	$(VENV)/bin/maturin develop --release --extras test -q
	touch $@

setup: $(VENV)/.built

build: setup

lint: setup
	cargo fmt --check
	cargo clippy --release -q -- -D warnings
	$(VENV)/bin/ruff check python tests bench samples examples docs/gen_cli.py
	$(VENV)/bin/ruff format --check python tests bench samples examples docs/gen_cli.py

# pytest's exit code 5 (no tests collected) is a failure too.
# The Rust core's unit tests (hand-computed cases of the readers, model, cache policies and
# devices), then the Python suite on real traces.
test: sysdeps setup lint
	cargo test --release -q
	IOTWIN_SHARED=$(SHARED) $(PY) -m pytest -q -ra; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

SAMPLE := samples/pgbench.parquet
OUT    := out

# The whole pipeline on the embedded sample (a real pgbench run captured by iotwin).
demo: setup
	@mkdir -p $(OUT)
	$(VENV)/bin/iotwin characterize $(SAMPLE)
	$(VENV)/bin/iotwin characterize $(SAMPLE) --json > $(OUT)/characterize.json
	$(VENV)/bin/iotwin fit $(SAMPLE) --levels auto -o $(OUT)/model.json
	$(VENV)/bin/iotwin show $(OUT)/model.json
	$(VENV)/bin/iotwin synth $(OUT)/model.json -o $(OUT)/twin.parquet --seed 1
	$(VENV)/bin/iotwin validate $(SAMPLE) $(OUT)/twin.parquet
	$(VENV)/bin/iotwin validate $(SAMPLE) $(OUT)/twin.parquet --json > $(OUT)/validation.json
	$(VENV)/bin/iotwin run $(OUT)/model.json --target $(OUT)/target.img --duration 5 --json $(OUT)/run.json --record $(OUT)/run.parquet
	@rm -f $(OUT)/target.img
	$(VENV)/bin/iotwin whatif cache $(SAMPLE) --over hdd-7200 -o $(OUT)/whatif-cache.json
	$(VENV)/bin/iotwin whatif intensity $(OUT)/model.json --device hdd-7200 -o $(OUT)/whatif-intensity.json
	$(VENV)/bin/iotwin whatif defrag $(SAMPLE) -o $(OUT)/whatif-defrag.json
	$(VENV)/bin/iotwin report $(SAMPLE) $(OUT) -o $(OUT)/report.html
	@echo "results in $(OUT)/: characterize.json, model.json, twin.parquet, validation.json, run.json, run.parquet, whatif-*.json"
	@echo "report: $(abspath $(OUT))/report.html (open it in a browser; it works offline)"

clean:
	rm -rf target $(VENV) out
