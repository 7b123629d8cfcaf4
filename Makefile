# tailscope — the README's two commands are `make run` and `make test`.
# Every target runs the idempotent bootstrap first (installs what is missing).
SHELL := /bin/bash
JOBS ?= 2
# ccache rewrites paths under the checkout to relative ones, so clones and
# worktrees share cache hits.
export CCACHE_BASEDIR := $(CURDIR)
# The trees built with debug info (sanitizers -g1, fuzzers -g) would otherwise also
# hash the build directory (ccache's hash_dir), so a clone at another path missed
# on every file: ~4.5 min of ASan and ~3 min of TSan compiles per fresh clone.
# The cost: a cached object's DW_AT_comp_dir names the clone that first built it
# (file names are relative to the checkout, so stack traces still read right).
export CCACHE_NOHASHDIR := 1
# Precompiled headers (TAILSCOPE_PCH, cmake/Tailscope.cmake) hit in ccache only
# when it may ignore the PCH's recorded defines and __TIME__/__DATE__ macros, and
# the just-made .gch's fresh time stamps (ccache's manual, "Precompiled headers").
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime
BUILD ?= build
VENV := .venv
PY := $(VENV)/bin/python
CMAKE_GEN := -G Ninja
# gcc's TSan runtime cannot map its shadow memory under the high ASLR entropy of
# recent kernels ("unexpected memory mapping"); running without ASLR avoids it.
NOASLR := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo "setarch $$(uname -m) -R")

SOAK_MINUTES ?= 30

.PHONY: all bootstrap build build-asan build-tsan lint lint-native test test-native test-asan test-tsan test-fuzz test-python run bench soak interop cluster-e2e clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B $(BUILD)/release $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)/release -j $(JOBS)

# The sanitizer trees build the unit tests and what they link, nothing else
# (target tailscope_tests): engines are tested end to end from the release tree.
build-asan: bootstrap
	@cmake -S . -B $(BUILD)/asan $(CMAKE_GEN) -DTAILSCOPE_SANITIZER=asan -DTAILSCOPE_ENGINES=OFF -DTAILSCOPE_BENCHMARKS=OFF >/dev/null
	@cmake --build $(BUILD)/asan -j $(JOBS) --target tailscope_tests

build-tsan: bootstrap
	@cmake -S . -B $(BUILD)/tsan $(CMAKE_GEN) -DTAILSCOPE_SANITIZER=tsan -DTAILSCOPE_ENGINES=OFF -DTAILSCOPE_BENCHMARKS=OFF >/dev/null
	@cmake --build $(BUILD)/tsan -j $(JOBS) --target tailscope_tests

test-native: build
	cd $(BUILD)/release && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(BUILD)/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

test-tsan: build-tsan
	cd $(BUILD)/tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(NOASLR) ctest --output-on-failure -j $(JOBS)

# Short, bounded fuzzing of the parsers: every scripts/fuzz-* for FUZZ_SECONDS,
# as many at once as there are CPUs (scripts/run-fuzzers).
test-fuzz: bootstrap
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-20} scripts/run-fuzzers

# pytest in two parts: the test files spread over $(JOBS) processes (pytest-xdist;
# --dist loadfile keeps a file in one process, so a module fixture — a built
# graph, a running server — is made once), then the tests marked `serial`
# (they measure, or need both CPUs) alone. Exit 5 is "none marked serial".
test-python: build
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile -m "not serial" --durations=15 tests
	$(PY) -m pytest -q -m serial tests; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# Python lint (ruff: rules and formatting, checked only, never rewritten), types
# (mypy, non-strict but checked) and the driver's layers (import-linter: a module imports
# only the layers below it, docs/architecture.md); configuration in pyproject.toml.
lint: bootstrap
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# native/: clang-format and clang-tidy (.clang-format, .clang-tidy); tidy needs the
# release tree's compile_commands.json and remembers files that passed.
lint-native: build
	scripts/lint-native --build-dir $(BUILD)/release --jobs $(JOBS)

# lint first (cheapest), then build, ctest (release), ctest under ASan+UBSan and TSan,
# fuzz, then pytest; each stage's wall time is printed at the end (scripts/timed-stages),
# after pytest's summary line.
test:
	@MAKE="$(MAKE)" scripts/timed-stages lint lint-native test-native test-asan test-tsan test-fuzz test-python cluster-e2e

run: build
	$(VENV)/bin/tailscope run $(RUN_ARGS)

bench: build
	@for b in $(BUILD)/release/bin/*_benchmark $(BUILD)/release/bin/*-bench; do \
	  [ -x "$$b" ] || continue; echo "== $$b"; "$$b" || exit 1; done
	@for s in scripts/bench-*; do if [ -x "$$s" ]; then echo "== $$s"; "$$s" || exit 1; fi; done
	$(VENV)/bin/tailscope bench baseline

# Load held over time (not part of make test): every model of the socialnet graph
# at 80 % of its ceiling, per-minute rate, p50/p99, errors, RSS, threads, fds.
soak: build
	$(VENV)/bin/tailscope soak --minutes $(SOAK_MINUTES) --out $(BUILD)/soak.json

# A real Jaeger v2 (built once from the Go module proxy when Go >= 1.23 is present,
# cached in ~/.cache/tailscope) and the tests that export to it and read it back.
interop: build
	@scripts/bootstrap --jaeger; rc=$$?; if [ $$rc -eq 3 ]; then echo "interop: skipped (no Go >= 1.23)"; exit 0; fi; exit $$rc
	$(PY) -m pytest -q tests/engines/test_jaeger_roundtrip.py

# The graph in containers, the last stage of make test: installs Debian's docker.io,
# docker-compose and mmdebstrap when missing, then starts a private Docker daemon, builds
# the image, runs socialnet with the load from a container, the Kubernetes manifests' pods
# on Docker with a Jaeger pod (where the bootstrap built Jaeger), and the containers study, and
# checks that nothing is left behind (docs/deploy.md, sections 3 and 5). Skipped with the reason
# when the tools cannot be installed, without root, or when dockerd cannot start here.
cluster-e2e: build
	@scripts/bootstrap --docker; rc=$$?; if [ $$rc -eq 3 ]; then echo "cluster-e2e: skipped (cannot install the container tools here)"; exit 0; fi; exit $$rc
	TAILSCOPE_CLUSTER_E2E=1 $(PY) -m pytest -q -rs tests/e2e/test_cluster.py

clean:
	rm -rf $(BUILD)
