# The one task runner: people and CI call these targets.
# Everything runs in a project virtual environment (.venv), so `make demo` and
# `make test` work on a fresh machine whatever its Python policy (PEP 668).
BOOTSTRAP_PYTHON ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
DEMO := build/demo
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install reinstall system-deps demo test test-standalone test-long mutants bench scorecard fixtures lint docs wheel standalone

$(PYTHON):  ## the project's virtual environment (Debian's python3-venv installed if missing)
	@$(BOOTSTRAP_PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  rm -rf $(VENV); apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null \
	  && $(BOOTSTRAP_PYTHON) -m venv $(VENV); }
	@$(PYTHON) -m pip install -q --disable-pip-version-check --upgrade pip

# What the installed package is built from: a change here rebuilds it, nothing else does
# (`make install` with nothing changed takes no time; `make reinstall` forces a rebuild).
BUILT_FROM := pyproject.toml build_backend/statemigrate_build.py rust/Cargo.toml rust/Cargo.lock \
  $(shell find rust/src -name '*.rs') plugins/turbokv/pyproject.toml plugins/turbokv/Cargo.toml \
  plugins/turbokv/Cargo.lock $(shell find plugins/turbokv/src -name '*.rs')
INSTALLED := $(VENV)/.installed

install: $(INSTALLED)  ## the package, every engine driver and the test tools (builds the Rust extension once)

reinstall:  ## install again from scratch (the Rust extension rebuilt)
	@rm -f $(INSTALLED)
	@$(MAKE) --no-print-directory install

$(INSTALLED): $(PYTHON) $(BUILT_FROM)
	@echo "install: building the Rust extension and installing the engine drivers (cargo: minutes the first time)"
	@rm -f src/statemigrate/_native.*.so  # a stale build of another ABI tag would be loaded first
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all,test]"
	@# Bytecode, as a wheel's install compiles it: without it every process compiles the
	@# package again where PYTHONDONTWRITEBYTECODE is set (0.1 s of each start-up here).
	@$(PYTHON) -m compileall -q src/statemigrate >/dev/null
	@# TurboKV (plugins/turbokv, its own distribution) needs the CPU's AES instructions.
	@if grep -qw aes /proc/cpuinfo 2>/dev/null; then \
	  echo "install: building the TurboKV plugin (plugins/turbokv)"; \
	  rm -f plugins/turbokv/python/statemigrate_turbokv/_native.*.so; \
	  $(PYTHON) -m pip install -q --disable-pip-version-check -e plugins/turbokv; \
	  $(PYTHON) -m compileall -q plugins/turbokv/python >/dev/null; \
	else echo "install: this CPU has no AES instructions: the turbokv engine is left out"; fi
	@touch $@
	@echo "install: done ($(VENV))"

SYSTEM_DEPS := sqlite3 rocksdb-tools librocksdb-dev g++ postfix postfix-lmdb lmdb-utils
system-deps:  ## Debian's sqlite3, ldb, librocksdb-dev, g++, postfix-lmdb, lmdb-utils (the app tests)
	@dpkg-query -W -f='$${Status}\n' $(SYSTEM_DEPS) 2>/dev/null | grep -c '^install ok installed$$' \
	  | grep -qx '$(words $(SYSTEM_DEPS))' || { \
	  echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	     --no-install-recommends $(SYSTEM_DEPS) >/dev/null; }

demo: install  ## convert the bundled example store, verify it, show the digest
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(VENV)/bin/statemigrate convert examples/app-state.sqlite $(DEMO)/app-state.rocksdb
	$(VENV)/bin/statemigrate verify examples/app-state.sqlite $(DEMO)/app-state.rocksdb
	$(VENV)/bin/statemigrate checksum $(DEMO)/app-state.rocksdb

# Two workers (pytest-xdist), one per core: most tests wait on child processes and disks.
# TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

test: install system-deps  ## the whole test suite (kill harness and fuzzers bounded; deterministic)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rxs --durations=20 -n $(TEST_WORKERS) --dist loadgroup

test-standalone: install  ## only the standalone build's tests (make test runs them too; builds it: 1-2 min)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rxs tests/test_standalone.py

test-long: install system-deps  ## the same with the long kill harness and random exploration
	STATEMIGRATE_LONG=1 $(PYTHON) -m pytest -q -p no:cacheprovider

# Not in CI (.ci/run): minutes, on demand, before an issue about the tests is called resolved.
mutants: install system-deps  ## the curated mutations (tests/mutants/mutations.toml), each killed by its tests
	$(PYTHON) tests/mutants/run.py

# The bench extra of pyproject.toml (matplotlib, for the chart) is installed by name (not
# `pip install -e .[bench]`: that would rebuild the native extension).
bench: install  ## the conversion and memory benchmarks (1M and 4M records; several minutes): data files in benchmarks/results/, the chart in docs/img/
	$(PYTHON) -m pip install -q --disable-pip-version-check "matplotlib>=3.8"
	$(PYTHON) benchmarks/build_native.py  # the redb ceilings: the cargo feature bench
	$(PYTHON) benchmarks/run.py --rss-n "" --results benchmarks/results
	$(PYTHON) benchmarks/rss.py --results benchmarks/results
	$(PYTHON) benchmarks/chart.py

scorecard: install  ## the performance targets, met or missed, from one run (1M records, medians of 5; about 20 minutes): data files in benchmarks/results/, the charts in docs/img/
	$(PYTHON) -m pip install -q --disable-pip-version-check "matplotlib>=3.8"
	$(PYTHON) benchmarks/scorecard.py --runs 5 --results benchmarks/results
	$(PYTHON) benchmarks/chart.py

fixtures: install  ## remake the small fixture stores made by the Python drivers
	$(PYTHON) fixtures/make_fixtures.py

lint: install  ## the gate CI runs before the tests: ruff (lint, format), mypy, cargo fmt, clippy and the crate's own tests
	$(PYTHON) -m ruff check src tests benchmarks plugins/turbokv/python plugins/turbokv/tests docs/hooks
	$(PYTHON) -m ruff format --check src tests benchmarks plugins/turbokv/python plugins/turbokv/tests docs/hooks
	$(PYTHON) -m mypy src/statemigrate plugins/turbokv/python/statemigrate_turbokv
	cd rust && cargo fmt --check && cargo clippy --release --all-targets --quiet -- -D warnings && cargo test --release --quiet
	cd rust/fixture-maker && cargo fmt --check
	cd rust/fjall-fixture-maker && cargo fmt --check
	cd plugins/turbokv && cargo fmt --check && cargo clippy --release --quiet -- -D warnings

# The docs site. Its reference page imports the CLI (docs/hooks/commands.py), so the
# package is installed first where it is not yet; the docs extra of pyproject.toml is
# installed by name (not `pip install -e .[docs]`: that would rebuild the native extension).
docs: $(PYTHON)  ## the docs site (mkdocs, Material theme) into build/site, built with --strict
	@$(PYTHON) -c 'import statemigrate.cli' 2>/dev/null || $(MAKE) install
	$(PYTHON) -m pip install -q --disable-pip-version-check "mkdocs>=1.6,<2" "mkdocs-material>=9.5,<10"
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

# The release wheel, on demand (minutes of compiling: CI does not build it). Its own Cargo
# target directory, so the development build in rust/target is not invalidated.
WHEEL_TARGET_DIR ?= $(abspath build/wheel-target)

wheel: $(PYTHON)  ## the abi3 wheel and sdist into dist/, audited, then installed into a fresh venv and smoke-tested
	$(PYTHON) -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" auditwheel
	rm -f dist/statemigrate-*
	CARGO_TARGET_DIR=$(WHEEL_TARGET_DIR) $(VENV)/bin/maturin build --release --compatibility pypi --out dist
	$(VENV)/bin/maturin sdist --out dist
	@if [ "$$(uname -s)" = Linux ]; then $(VENV)/bin/auditwheel show dist/statemigrate-*.whl; fi
	@smoke=$$(mktemp -d) && trap 'rm -rf "$$smoke"' EXIT && set -e && \
	  $(BOOTSTRAP_PYTHON) -m venv "$$smoke/venv" && \
	  "$$smoke/venv/bin/pip" install -q --disable-pip-version-check dist/statemigrate-*.whl apsw && \
	  "$$smoke/venv/bin/statemigrate" convert examples/app-state.sqlite "$$smoke/app-state.jsonl" && \
	  "$$smoke/venv/bin/statemigrate" convert examples/app-state.sqlite "$$smoke/app-state.sqlite" && \
	  "$$smoke/venv/bin/statemigrate" verify "$$smoke/app-state.jsonl" "$$smoke/app-state.sqlite" && \
	  echo "wheel: $$(ls dist/statemigrate-*.whl) installs and converts in a fresh venv of $(BOOTSTRAP_PYTHON)"

# The command line with its own interpreter and every installed engine driver, for an
# installer to ship (docs/installer.md): no Python needed where it runs. PyInstaller, one
# folder (packaging/standalone/statemigrate.spec); a few minutes. Uses the venv's package
# and drivers as they are (run `make install` first on a fresh checkout).
STANDALONE := dist/statemigrate-standalone-$(shell uname -s | tr A-Z a-z)-$(shell uname -m)

standalone: $(PYTHON)  ## the standalone executable (one folder) into dist/, with its SHA256SUMS
	@# The standalone extra of pyproject.toml (not `pip install -e .[standalone]`: that
	@# would rebuild the native extension).
	$(PYTHON) -m pip install -q --disable-pip-version-check "pyinstaller>=6,<7"
	rm -rf $(STANDALONE) build/standalone && mkdir -p dist
	$(VENV)/bin/pyinstaller --noconfirm --log-level WARN --distpath build/standalone/dist \
	  --workpath build/standalone/work packaging/standalone/statemigrate.spec
	mv build/standalone/dist/statemigrate $(STANDALONE)
	cd $(STANDALONE) && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort \
	  | xargs -d '\n' sha256sum > SHA256SUMS
	$(STANDALONE)/statemigrate --version
	@echo "standalone: $(STANDALONE)/statemigrate ($$(du -sh $(STANDALONE) | cut -f1))"
