# cutecall — the two set-up commands of the README.
#   make demo   compile a CuTe DSL kernel and run it from JAX (on a machine
#               without a GPU: compile, print the lowered call, say so)
#   make test   every test this machine can run (C++, the C++ under
#               ASan+UBSan, the fuzzers briefly, Python, each front with
#               the other's framework unimportable; docs/reliability.md)
#   make fuzz   each libFuzzer target for FUZZ_SECONDS (default 60)
# Both create the environment (.venv) on first use.

VENV      := .venv
PY        := $(VENV)/bin/python
PIP       := $(VENV)/bin/pip
# The third-party kernel corpus (tests/external): pyproject's `external` extra.
EXTERNAL  := "quack-kernels>=0.6.5,<0.7" "flash-attn-4>=4.0.0b36,<4.1" \
             "apache-tvm-ffi>=0.1.11,<0.2" torch-c-dlpack-ext einops \
             "liger-kernel>=0.8.5,<0.9" "nvidia-cutlass-operators>=0.3,<0.4" \
             "nvidia-cudnn-frontend>=1.32,<2" "flashinfer-python>=0.7.2,<0.8"
DEPS      := "jax>=0.8.1,<0.13" "nvidia-cutlass-dsl[cu13]>=4.8,<4.9" \
             "torch>=2.10,<2.16" "tqdm>=4.60,<5" flatbuffers \
             "redis>=5,<9" "fsspec>=2023.1" \
             "nanobind>=2.4" "scikit-build-core>=0.10" "pytest>=8" numpy \
             $(EXTERNAL)
SOURCES   := $(shell find cpp python -type f \( -name '*.cc' -o -name '*.h' -o -name '*.py' \)) \
             CMakeLists.txt pyproject.toml
JOBS      ?= 2

.PHONY: demo test test-cpp test-sanitize test-fuzz fuzz fuzz-build test-python install clean \
        wheel test-install

$(VENV)/.deps: pyproject.toml
	@test -x $(PY) || $$(tools/find_python.sh) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(DEPS)
	@touch $@

# --no-deps keeps the build offline-fast; `pip check` then fails the set-up
# if pyproject declares a dependency that DEPS does not install.
$(VENV)/.installed: $(VENV)/.deps $(SOURCES)
	$(PIP) install -q --no-build-isolation --no-deps .
	$(PIP) check
	@touch $@

install: $(VENV)/.installed

# A manylinux wheel for WHEEL_PYTHON (default 3.12) in dist/: needs no
# compiler to install (tools/wheel.sh: scikit-build-core, auditwheel).
WHEEL_PYTHON ?= 3.12
wheel:
	tools/wheel.sh $(WHEEL_PYTHON)

# The wheels for every Python CI covers, each installed the ways users
# install it into a fresh venv with no compiler on PATH, running the tests
# that install must pass (tools/ci/install_matrix.sh lists the venvs).
WHEEL_PYTHONS ?= 3.10 3.12 3.13
test-install:
	for v in $(WHEEL_PYTHONS); do tools/wheel.sh $$v || exit 1; done
	tools/ci/install_matrix.sh

demo: $(VENV)/.installed
	$(PY) -m cutecall.demo

test: test-cpp test-sanitize test-fuzz test-python test-install

test-cpp: $(VENV)/.deps
	@mkdir -p build
	cmake -S . -B build/tests -DCUTECALL_BUILD_TESTS=ON -DCUTECALL_BUILD_PYTHON=OFF \
	      -DCUTECALL_BUILD_XLA=ON -DPython_EXECUTABLE=$(abspath $(PY)) > build/tests.log 2>&1 \
	  || { cat build/tests.log; exit 1; }
	cmake --build build/tests -j $(JOBS)
	ctest --test-dir build/tests --output-on-failure

# The same GoogleTests built with AddressSanitizer + UndefinedBehaviorSanitizer
# (default compiler; any report fails the run). Own build dir: build/asan.
SANITIZE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUTECALL_SANITIZE=address,undefined
SANITIZE_ENV   := ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1 \
                  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

test-sanitize: $(VENV)/.deps
	@mkdir -p build
	cmake -S . -B build/asan $(SANITIZE_FLAGS) -DCUTECALL_BUILD_TESTS=ON -DCUTECALL_BUILD_PYTHON=OFF \
	      -DCUTECALL_BUILD_XLA=ON -DPython_EXECUTABLE=$(abspath $(PY)) > build/asan.log 2>&1 \
	  || { cat build/asan.log; exit 1; }
	cmake --build build/asan -j $(JOBS)
	$(SANITIZE_ENV) ctest --test-dir build/asan --output-on-failure

# libFuzzer targets (cpp/fuzz), clang with ASan+UBSan: build/fuzz. Each runs
# for FUZZ_SECONDS from its committed seeds (cpp/fuzz/corpus/<target>, read
# only) and what earlier runs found (build/fuzz/corpus/<target>); a crash
# fails the run and leaves its input in build/fuzz/crashes/<target>/.
# test-fuzz is make test's bounded run: FUZZ_CI_SECONDS each.
FUZZERS         := launch_plan bundle_manifest xla_attrs elf_symbols
FUZZ_SECONDS    ?= 60
FUZZ_CI_SECONDS ?= 20
FUZZ_CXX        ?= clang++

fuzz-build: $(VENV)/.deps
	@mkdir -p build
	@command -v $(FUZZ_CXX) >/dev/null || { echo "make fuzz needs clang with libFuzzer ($(FUZZ_CXX)): apt-get install clang"; exit 1; }
	cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DCUTECALL_BUILD_FUZZERS=ON -DCUTECALL_BUILD_PYTHON=OFF -DCUTECALL_BUILD_XLA=ON \
	      -DPython_EXECUTABLE=$(abspath $(PY)) > build/fuzz.log 2>&1 || { cat build/fuzz.log; exit 1; }
	cmake --build build/fuzz -j $(JOBS)

# $(call run-fuzzers,SECONDS): one target at a time; prints libFuzzer's
# final line and stats per target (full log: build/fuzz/<target>.log).
define run-fuzzers
	@for t in $(FUZZERS); do \
	  mkdir -p build/fuzz/corpus/$$t build/fuzz/crashes/$$t; \
	  dict=""; test -f cpp/fuzz/$$t.dict && dict="-dict=cpp/fuzz/$$t.dict"; \
	  echo "fuzz_$$t: $(1) s"; \
	  build/fuzz/bin/fuzz_$$t -max_total_time=$(1) -timeout=10 -print_final_stats=1 $$dict \
	    -artifact_prefix=build/fuzz/crashes/$$t/ build/fuzz/corpus/$$t cpp/fuzz/corpus/$$t \
	    > build/fuzz/$$t.log 2>&1 \
	    || { tail -n 40 build/fuzz/$$t.log; echo "fuzz_$$t FAILED: input in build/fuzz/crashes/$$t/"; exit 1; }; \
	  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|new_units_added|peak_rss)' build/fuzz/$$t.log; \
	done
endef

fuzz: fuzz-build
	$(call run-fuzzers,$(FUZZ_SECONDS))

test-fuzz: fuzz-build
	$(call run-fuzzers,$(FUZZ_CI_SECONDS))

# Then each front's tests again with the other framework unimportable, as
# for a user who installed cutecall[torch] or cutecall[jax] only
# (tests/without.py blocks the import).
test-python: $(VENV)/.installed
	$(PY) -m pytest tests -q -rs
	$(PY) tests/without.py jax,jaxlib -- tests/torch tests/test_bad_inputs.py -q -rs
	$(PY) tests/without.py torch -- tests/jax tests/bundle tests/test_bad_inputs.py -q -rs

clean:
	rm -rf build $(VENV)
