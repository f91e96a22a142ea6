# cutecall — the two set-up commands of the README.
#   make demo   compile a CuTe DSL kernel and run it from JAX (on a machine
#               without a GPU: compile, print the lowered call, say so)
#   make test   every test this machine can run (C++, the C++ under
#               ASan+UBSan, Python; docs/reliability.md)
# Both create the environment (.venv) on first use.

VENV      := .venv
PY        := $(VENV)/bin/python
PIP       := $(VENV)/bin/pip
# The third-party kernel corpus (tests/external): pyproject's `external` extra.
EXTERNAL  := "quack-kernels>=0.6.5,<0.7" "flash-attn-4>=4.0.0b36,<4.1" \
             "apache-tvm-ffi>=0.1.11,<0.2" torch-c-dlpack-ext einops
DEPS      := "jax>=0.7.2,<0.13" "nvidia-cutlass-dsl[cu13]>=4.8,<4.9" \
             "torch>=2.10,<2.16" flatbuffers \
             "nanobind>=2.4" "scikit-build-core>=0.10" "pytest>=8" numpy \
             $(EXTERNAL)
SOURCES   := $(shell find cpp python -type f \( -name '*.cc' -o -name '*.h' -o -name '*.py' \)) \
             CMakeLists.txt pyproject.toml
JOBS      ?= 2

.PHONY: demo test test-cpp test-sanitize test-python install clean

$(VENV)/.deps: pyproject.toml
	@test -x $(PY) || $$(tools/find_python.sh) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(DEPS)
	@touch $@

$(VENV)/.installed: $(VENV)/.deps $(SOURCES)
	$(PIP) install -q --no-build-isolation --no-deps .
	@touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m cutecall.demo

test: test-cpp test-sanitize test-python

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

test-python: $(VENV)/.installed
	$(PY) -m pytest tests -q -rs

clean:
	rm -rf build $(VENV)
