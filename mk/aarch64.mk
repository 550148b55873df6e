# `make test-aarch64`: the Raspberry Pi 5 build (aarch64-unknown-linux-gnu),
# cross-compiled and checked on this x86-64 machine (issue #8, DESIGN.md "aarch64").
#  1. installs Debian's cross toolchain and qemu-user (apt-get) and the rustup
#     target, if missing;
#  2. fetches the aarch64 wheels of torch / executorch / the CUDA runtime stubs
#     libtorch_cpu needs into build/aarch64/ (pip --platform; never into .venv);
#  3. cargo build --release --target aarch64-unknown-linux-gnu against them
#     (target/pi5/aarch64-unknown-linux-gnu/release/runlens: a target directory of
#     its own, so that .ci/run builds it while `make test` holds target/'s lock);
#  4. lays out build/aarch64/runlens-pi5/: the binary and the libraries it loads
#     from the wheels, with run paths relative to it (scripts/aarch64/bundle.py):
#     the folder to copy to a Pi, with models/minilm;
#  5. runs that bundle under qemu-aarch64 -cpu cortex-a76: `inspect --json` on
#     both .pte files (must equal the x86-64 binary's output) and `run --json`
#     with all three backends on two sentences, checked against reference.json.
#     The bundle's run paths no longer name build/aarch64/site, so a library
#     missing from it fails the check. Then text generation on the tiny GPT-2
#     (issue #26): `run --json --first-logits` of A64_GEN_BACKENDS (the quantized
#     programs, whose XNNPACK and ATen kernels differ most between x86-64 and Arm)
#     under qemu against the x86-64 binary's on the same prompt: the same greedy
#     ids, first-step logits close, the quantized programs also against their
#     own PyTorch reference, and no subgraph refused by XNNPACK
#     (scripts/aarch64/check.py generation; docs/pi5.md).
#     Then llama.cpp (issue 35): its kernels are the Pi 5's (inspect's
#     llama_cpp_system_info says DOTPROD = 1), the three GGUF columns of the tiny
#     GPT-2 against the x86-64 binary's (scripts/aarch64/check_llama.py), and under
#     -cpu cortex-a53 (no dotprod) a refusal naming what the CPU lacks, not SIGILL.
#  6. the same for the lite build (no eager path, no libtorch; issue #16):
#     `make bundle-aarch64-lite` lays out build/aarch64/runlens-pi5-lite/ from
#     target/pi5-lite/aarch64-unknown-linux-gnu/release/runlens and only the
#     executorch wheel's libraries (and ONNX Runtime's, opened at run time); its
#     inspect output must equal x86-64's and its portable, XNNPACK and ONNX
#     Runtime (model.onnx, model.int8.onnx: issue 41) runs match reference.json
#     within scripts/aarch64/check.py's bounds; then `runlens footprint`
#     measures the full and lite bundles under qemu (no Python rows: no aarch64
#     Python here).
# Included from the Makefile (uses its VPY, VENV_STAMP, BIN, MODELS, build, models).

A64_TRIPLE := aarch64-unknown-linux-gnu
A64_DIR := $(CURDIR)/build/aarch64
A64_SITE := $(A64_DIR)/site
A64_PREFIX := $(A64_DIR)/prefix
A64_OUT := $(A64_DIR)/out
A64_TARGET_DIR := target/pi5
A64_BIN := $(A64_TARGET_DIR)/$(A64_TRIPLE)/release/runlens
A64_BUNDLE := $(A64_DIR)/runlens-pi5
A64_LITE_BIN := $(A64_TARGET_DIR)-lite/$(A64_TRIPLE)/release/runlens
A64_LITE_BUNDLE := $(A64_DIR)/runlens-pi5-lite
A64_WHEELS_STAMP := $(A64_SITE)/.unpacked
A64_PREFIX_STAMP := $(A64_PREFIX)/proc/cpuinfo
# ONNX Runtime is opened at run time (no DT_NEEDED names it): both bundles carry it in lib/.
A64_ORT_LIB := $(A64_SITE)/onnxruntime/capi/libonnxruntime.so.1.31.1
A64_SENTENCES := 2
A64_THREADS := 2
# Text generation under qemu: the backends (space-separated), model, prompt (one of
# the model's reference prompts, assets/prompts.txt) and new tokens (about 20 s of
# emulation for the three); A64_GEN_ARGS, what both binaries are run with.
A64_GEN_BACKENDS := xnnpack-int8 xnnpack-8da4w eager-int4
A64_GEN_MODEL := models/tiny-gpt2
A64_GEN_PROMPT := The quick brown fox
A64_GEN_TOKENS := 16
A64_GEN_ARGS = --model $(A64_GEN_MODEL) --threads $(A64_THREADS) --backends $(subst $(space),$(,),$(strip $(A64_GEN_BACKENDS))) \
  run --json --first-logits --max-new-tokens $(A64_GEN_TOKENS) "$(A64_GEN_PROMPT)"

# llama.cpp's columns under qemu (issue 35): the three GGUF files of the tiny GPT-2.
A64_LLAMA_BACKENDS := llamacpp-f32 llamacpp-q8_0 llamacpp-q4_0
A64_LLAMA_ARGS = --model $(A64_GEN_MODEL) --threads $(A64_THREADS) --backends $(subst $(space),$(,),$(strip $(A64_LLAMA_BACKENDS))) \
  run --json --first-logits --max-new-tokens $(A64_GEN_TOKENS) "$(A64_GEN_PROMPT)"

# Environment of the cross build. LIBTORCH_USE_PYTORCH (exported by the Makefile
# for the host build) is unset: it would make tch use the host venv's torch.
# -rpath-link: a cross ld ignores libtorch_cpu's own $ORIGIN rpath when it looks
# for libcudart/libcupti, so name their folder.
A64_ENV := env -u LIBTORCH_USE_PYTORCH \
  LIBTORCH=$(A64_SITE)/torch \
  EXECUTORCH_DIR=$(A64_SITE)/executorch \
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
  CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++ \
  AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-Wl,-rpath-link,$(A64_SITE)/nvidia/cu13/lib" \
  BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu="--target=aarch64-linux-gnu -isystem $$(aarch64-linux-gnu-gcc -print-file-name=include) -isystem /usr/aarch64-linux-gnu/include" \
  CMAKE_PROJECT_INCLUDE=$(CURDIR)/mk/ggml-pi5.cmake

# The bundle's run paths are relative to it ($ORIGIN/lib), so no LD_LIBRARY_PATH
# is needed; -L holds the aarch64 libc and the fake ARM /proc/cpuinfo + midr_el1
# (scripts/aarch64/make-prefix.sh).
A64_QEMU = $$(command -v qemu-aarch64-static || command -v qemu-aarch64) -cpu cortex-a76 -L $(A64_PREFIX)
# A Cortex-A53 (armv8.0: no dotprod, no fp16 arithmetic): llama.cpp must be refused, not die.
A64_QEMU_A53 = $$(command -v qemu-aarch64-static || command -v qemu-aarch64) -cpu cortex-a53 -L $(A64_PREFIX)

.PHONY: test-aarch64 build-aarch64 bundle-aarch64 sysdeps-aarch64 build-aarch64-lite bundle-aarch64-lite

test-aarch64: bundle-aarch64 bundle-aarch64-lite build models $(A64_GEN_MODEL)/manifest.json $(A64_PREFIX_STAMP)
	@rm -rf $(A64_OUT) && mkdir -p $(A64_OUT)
	@echo "== inspect --json: aarch64 (emulated) vs x86-64"
	@for pte in portable xnnpack; do \
	  $(BIN) inspect --json $(MODELS)/$$pte.pte > $(A64_OUT)/inspect-$$pte.x86_64.json \
	    || { echo "error: x86-64 inspect $$pte failed"; exit 1; }; \
	  $(A64_QEMU) $(A64_BUNDLE)/runlens inspect --json $(MODELS)/$$pte.pte > $(A64_OUT)/inspect-$$pte.aarch64.json \
	    || { echo "error: aarch64 inspect $$pte failed"; exit 1; }; \
	  $(VPY) scripts/aarch64/check.py same $(A64_OUT)/inspect-$$pte.x86_64.json $(A64_OUT)/inspect-$$pte.aarch64.json || exit 1; \
	done
	@echo "== run --json --threads $(A64_THREADS), eager + portable + xnnpack (emulated) vs reference.json"
	@i=0; while IFS= read -r text && [ $$i -lt $(A64_SENTENCES) ]; do \
	  i=$$((i + 1)); \
	  $(A64_QEMU) $(A64_BUNDLE)/runlens --models $(MODELS) --threads $(A64_THREADS) --backends eager,portable,xnnpack \
	    run --json "$$text" > $(A64_OUT)/run-$$i.json 2> $(A64_OUT)/run-$$i.err; \
	  [ -s $(A64_OUT)/run-$$i.json ] || { echo "error: aarch64 run \"$$text\" printed nothing:"; cat $(A64_OUT)/run-$$i.err; exit 1; }; \
	done < assets/sentences.txt
	@$(VPY) scripts/aarch64/check.py run --backends eager,portable,xnnpack $(MODELS)/reference.json $(A64_OUT)/run-*.json
	@echo "== text generation: run --json --first-logits, $(A64_GEN_BACKENDS) on $(A64_GEN_MODEL), $(A64_GEN_TOKENS) tokens (emulated) vs x86-64"
	@$(BIN) $(A64_GEN_ARGS) > $(A64_OUT)/gen.x86_64.json 2> $(A64_OUT)/gen.x86_64.err; \
	  [ -s $(A64_OUT)/gen.x86_64.json ] || { echo "error: x86-64 generation printed nothing:"; cat $(A64_OUT)/gen.x86_64.err; exit 1; }
	@$(A64_QEMU) $(A64_BUNDLE)/runlens $(A64_GEN_ARGS) > $(A64_OUT)/gen.aarch64.json 2> $(A64_OUT)/gen.aarch64.err; \
	  [ -s $(A64_OUT)/gen.aarch64.json ] || { echo "error: aarch64 generation printed nothing:"; cat $(A64_OUT)/gen.aarch64.err; exit 1; }
	@$(VPY) scripts/aarch64/check.py generation $(A64_GEN_MODEL) $(A64_OUT)/gen.x86_64.json $(A64_OUT)/gen.aarch64.json $(A64_OUT)/gen.aarch64.err
	@echo "== llama.cpp (ggml for armv8.2-a+dotprod+fp16) under qemu -cpu cortex-a76: its kernels, then $(A64_LLAMA_BACKENDS) vs x86-64"
	@$(A64_QEMU) $(A64_BUNDLE)/runlens inspect --json $(A64_GEN_MODEL)/llamacpp-q4_0.gguf > $(A64_OUT)/gguf.aarch64.json \
	  || { echo "error: aarch64 inspect of the GGUF failed"; exit 1; }
	@grep -o '"llama_cpp_system_info": "[^"]*"' $(A64_OUT)/gguf.aarch64.json
	@grep -q '"llama_cpp_system_info": "[^"]*DOTPROD = 1' $(A64_OUT)/gguf.aarch64.json \
	  || { echo "error: the aarch64 llama.cpp was built without the dot-product kernels (mk/ggml-pi5.cmake)"; exit 1; }
	@$(BIN) $(A64_LLAMA_ARGS) > $(A64_OUT)/llama.x86_64.json 2> $(A64_OUT)/llama.x86_64.err \
	  || { echo "error: x86-64 llama.cpp run failed:"; cat $(A64_OUT)/llama.x86_64.err; exit 1; }
	@$(A64_QEMU) $(A64_BUNDLE)/runlens $(A64_LLAMA_ARGS) > $(A64_OUT)/llama.aarch64.json 2> $(A64_OUT)/llama.aarch64.err \
	  || { echo "error: aarch64 llama.cpp run failed:"; cat $(A64_OUT)/llama.aarch64.err; exit 1; }
	@$(VPY) scripts/aarch64/check_llama.py $(A64_OUT)/llama.x86_64.json $(A64_OUT)/llama.aarch64.json
	@echo "== llama.cpp on a CPU without dotprod (qemu -cpu cortex-a53): a clear refusal, not SIGILL"
	@$(A64_QEMU_A53) $(A64_BUNDLE)/runlens $(A64_LLAMA_ARGS) > $(A64_OUT)/llama.a53.json 2> $(A64_OUT)/llama.a53.err; code=$$?; \
	  grep -o '"error":"[^"]*"' $(A64_OUT)/llama.a53.json | head -1; \
	  [ $$code = 1 ] && grep -q "lacks dotprod" $(A64_OUT)/llama.a53.json \
	  || { echo "error: no refusal naming dotprod (exit $$code)"; cat $(A64_OUT)/llama.a53.err; exit 1; }
	@echo "== lite bundle (no libtorch): inspect --json vs x86-64, run --json portable + xnnpack + ONNX Runtime (float32, 8-bit) vs reference.json"
	@for pte in portable xnnpack; do \
	  $(A64_QEMU) $(A64_LITE_BUNDLE)/runlens inspect --json $(MODELS)/$$pte.pte > $(A64_OUT)/inspect-$$pte.lite.json \
	    || { echo "error: aarch64 lite inspect $$pte failed"; exit 1; }; \
	  $(VPY) scripts/aarch64/check.py same $(A64_OUT)/inspect-$$pte.x86_64.json $(A64_OUT)/inspect-$$pte.lite.json || exit 1; \
	done
	@i=0; while IFS= read -r text && [ $$i -lt $(A64_SENTENCES) ]; do \
	  i=$$((i + 1)); \
	  $(A64_QEMU) $(A64_LITE_BUNDLE)/runlens --models $(MODELS) --threads $(A64_THREADS) --backends portable,xnnpack,onnx,onnx-int8 \
	    run --json "$$text" > $(A64_OUT)/lite-run-$$i.json 2> $(A64_OUT)/lite-run-$$i.err; \
	  [ -s $(A64_OUT)/lite-run-$$i.json ] || { echo "error: aarch64 lite run \"$$text\" printed nothing:"; cat $(A64_OUT)/lite-run-$$i.err; exit 1; }; \
	done < assets/sentences.txt
	@$(VPY) scripts/aarch64/check.py run --backends portable,xnnpack,onnx,onnx-int8 $(MODELS)/reference.json $(A64_OUT)/lite-run-*.json
	@echo "== lite bundle: llama.cpp's columns (no libtorch needed) vs x86-64"
	@$(A64_QEMU) $(A64_LITE_BUNDLE)/runlens $(A64_LLAMA_ARGS) > $(A64_OUT)/llama.lite.json 2> $(A64_OUT)/llama.lite.err \
	  || { echo "error: aarch64 lite llama.cpp run failed:"; cat $(A64_OUT)/llama.lite.err; exit 1; }
	@$(VPY) scripts/aarch64/check_llama.py $(A64_OUT)/llama.x86_64.json $(A64_OUT)/llama.lite.json
	@echo "== footprint of the two bundles under qemu (emulated: memory includes qemu's own, times are not the Pi's)"
	@$(BIN) --models $(MODELS) --threads $(A64_THREADS) footprint --no-python --json --wrapper "$(A64_QEMU)" \
	  --full-binary $(A64_BUNDLE)/runlens --lite-binary $(A64_LITE_BUNDLE)/runlens > $(A64_OUT)/footprint.json
	@$(VPY) scripts/aarch64/check.py footprint $(A64_OUT)/footprint.json
	@echo "test-aarch64: ok ($(A64_BIN) $$(du -sb $(A64_BIN) | awk '{printf "%.1f MB", $$1 / 1e6}'); $(A64_BUNDLE) $$(du -sb $(A64_BUNDLE) | awk '{printf "%.0f MB", $$1 / 1e6}'); $(A64_LITE_BUNDLE) $$(du -sb $(A64_LITE_BUNDLE) | awk '{printf "%.0f MB", $$1 / 1e6}'))"

# llama.cpp's CMake cache is kept between builds (the sys crate configures once):
# when mk/ggml-pi5.cmake changes, its aarch64 build is cleaned so the new flags apply.
A64_LLAMA_STAMP := $(A64_TARGET_DIR)/$(A64_TRIPLE)/.ggml-pi5.cmake
$(A64_LLAMA_STAMP): mk/ggml-pi5.cmake
	@mkdir -p $(@D) && { [ ! -e $@ ] || cargo clean -q --release -p llama-cpp-sys-2 --target $(A64_TRIPLE) --target-dir $(A64_TARGET_DIR); } && cp $< $@

build-aarch64: sysdeps-aarch64 $(A64_WHEELS_STAMP) $(A64_LLAMA_STAMP)
	$(A64_ENV) cargo build --release --target $(A64_TRIPLE) --target-dir $(A64_TARGET_DIR)

# What to copy to the Pi (with models/minilm): runlens and the libraries it loads.
bundle-aarch64: build-aarch64
	@python3 scripts/aarch64/bundle.py $(A64_BIN) $(A64_SITE) $(A64_BUNDLE) --dlopen $(A64_ORT_LIB)

# The lite build for the Pi: no eager path, so no libtorch; it links only the
# executorch wheel's libraries, and its bundle takes only those (bundle.py is
# given the wheel's executorch/ folder alone, so anything else it needed would
# be missing and fail the check).
build-aarch64-lite: sysdeps-aarch64 $(A64_WHEELS_STAMP) $(A64_LLAMA_STAMP)
	$(A64_ENV) CARGO_BUILD_BUILD_DIR=$(CURDIR)/$(A64_TARGET_DIR) cargo build --release --no-default-features --target-dir $(A64_TARGET_DIR)-lite --target $(A64_TRIPLE)

bundle-aarch64-lite: build-aarch64-lite
	@python3 scripts/aarch64/bundle.py $(A64_LITE_BIN) $(A64_SITE)/executorch $(A64_LITE_BUNDLE) --dlopen $(A64_ORT_LIB)

# Debian's cross compiler and qemu-user, and Rust's aarch64 standard library.
sysdeps-aarch64:
	@scripts/ensure-apt.sh aarch64-linux-gnu-g++:g++-aarch64-linux-gnu 'qemu-aarch64-static|qemu-aarch64:qemu-user-static' \
	  readelf:binutils patchelf:patchelf
	@command -v rustup >/dev/null || { echo "error: rustup not found: the aarch64 target needs 'rustup target add $(A64_TRIPLE)'"; exit 1; }
	@rustup target list --installed | grep -qx $(A64_TRIPLE) || rustup target add $(A64_TRIPLE)

$(A64_WHEELS_STAMP): scripts/aarch64/fetch-wheels.sh | $(VENV_STAMP)
	scripts/aarch64/fetch-wheels.sh $(A64_DIR) $(VPY)
	@touch $@

$(A64_PREFIX_STAMP): scripts/aarch64/make-prefix.sh | sysdeps-aarch64
	scripts/aarch64/make-prefix.sh $(A64_PREFIX)
