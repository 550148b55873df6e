# `make test-models` (a prerequisite of `make test`): tiny random-weight
# checkpoints (tests/python/tiny_checkpoint.py, seeded; sizes unlike MiniLM) exported
# through python/export.py, and programs made the way other pipelines make
# them (python/export_course.py), for the tests of issue 13:
#   models/tiny-bert-mlm, models/tiny-distilbert-mlm   fill-mask
#   models/tiny-bert-cls, models/tiny-distilbert-cls   text-classification
#     portable + xnnpack each; tiny-distilbert-mlm also xnnpack-int8 and xnnpack-static
#   models/course/   at-mask.pte (the course's [1, V] wrapper), per-position.pte
#     (input_ids alone, [1, S, V]), float-input.pte and rank4-output.pte (not
#     drivable), programs.json
# and of issue 14 (text generation):
#   models/tiny-gpt2   a tiny GPT-2 (checkpoint and byte-level BPE tokenizer from
#     tests/python/tiny_checkpoint.py --arch gpt2), text-generation, L = 64: portable,
#     portable-nocache, xnnpack, xnnpack-nocache, and (issue 26) the quantized
#     xnnpack-int8 and xnnpack-8da4w (group 32: the model is 64 wide), each checked
#     against its quantized PyTorch model (about 2 minutes more of export)
#   models/course-gpt2/   window.pte ([1, V], XNNPACK) and window-per-position.pte
#     ([1, 32, V]): the course's left-padded window of 32, programs.json
# and of issue 25 (Llama-family decoders):
#   models/tiny-llama, models/tiny-qwen2, models/tiny-qwen3, models/tiny-llama2-sp
#     tiny Llama (GQA, llama3 rope, untied, three eos ids, Llama 3 tokens),
#     Qwen2 (biases, one KV head, tied), Qwen3 (q/k norms, own head_dim) and a
#     Llama with a SentencePiece-style byte-fallback tokenizer (checkpoints,
#     tokenizers and chat templates from tests/python/tiny_decoders.py), exported as
#     tiny-gpt2 is, but with L = 128 so that their chat-formatted prompts (65-78 tokens
#     with the templates' system text) fit with 24 new tokens: the four programs;
#     reference.json holds transformers' ids for the raw prompts and the chat ones;
#     tiny-llama, tiny-qwen2 and tiny-qwen3 also the quantized xnnpack-int8 and
#     xnnpack-8da4w (group 32), as tiny-gpt2 (QUANTIZED_DECODERS; about 45 s of CPU a program)
# and of issue 25's programs runlens cannot run:
#   models/llm-flow/update-cache.pte   a decoder-shaped program whose cache is written by
#     ExecuTorch's LLM custom operator llama::update_cache (tests/python/llm_flow_program.py)
# The text-generation exports (tiny-gpt2, the Llama-family decoders, the hub-layout
# ones, soak-gpt2 and the figures' models) also write llama.cpp's files
# (docs/gguf.md): llamacpp-f32.gguf by llama.cpp's converter (GGUF_CONVERTER_STAMP,
# mk/gguf-converter.mk), llamacpp-q8_0.gguf and llamacpp-q4_0.gguf by `runlens
# gguf-quantize`, hence `| build` (order-only: rebuilding runlens re-exports nothing).
# On the tiny models each conversion takes about 3 s (2.3-3.1 s wall, most of it the
# converter's imports) and each quantization well under a second; the context-*
# exports are the hub Qwen2 again and skip them (--no-gguf); the encoders here are
# fill-mask and text-classification, which get none.
# Every export runs its programs against transformers (ExecuTorch's Python
# runtime) and fails when they disagree. manifest.json / programs.json are the
# stamps: a second run does nothing. The exports run two at a time.
# `make models-figures` (not in `make test`): a DistilBERT-base-sized random
# checkpoint exported for fill-mask with all four programs, for the README's figures.
# `make models-gpt2-figures` (not in `make test`): models/gpt2-random, GPT-2 124M's
# sizes with random weights, text-generation with L = 192, the four float programs and
# the two quantized ones (xnnpack-int8, xnnpack-8da4w, groups of 128); it
# skips the check against transformers (the portable window program alone would
# take many minutes of CPU at this size; the tiny model checks the same code).
# It skips the check against transformers: with random weights this wide (0.2) at
# DistilBERT's size the float programs keep every top-1 token but their logits
# differ by up to 6e-2 (a relative 1e-4 and more), beyond the tiny models' tolerance;
# timings do not depend on it (README, "Random weights").
# Included from the Makefile (uses its VPY, VENV_STAMP).

TINY_ARCHS := bert-mlm distilbert-mlm bert-cls distilbert-cls
TINY_MODELS := $(TINY_ARCHS:%=models/tiny-%)
CHECKPOINTS := models/checkpoints
TINY_CKPT_STAMP := $(CHECKPOINTS)/.tiny-stamp
EXPORT_PY := python/export.py $(wildcard python/runlens_export/*.py python/runlens_export/archs/*.py)
COURSE := models/course
TEST_MODELS_JOBS ?= 2
FIGURES_MODEL := models/distilbert-base-random
GPT2_CKPT := $(CHECKPOINTS)/tiny-gpt2
GPT2_MODELS := models/tiny-gpt2/manifest.json models/course-gpt2/programs.json
# what tests/python/tiny_checkpoint.py trains the GPT-2 tokenizer on
GPT2_TOKENIZER_TEXT := assets/corpus.txt assets/sentences.txt assets/fill-mask.txt assets/demo.txt
# The Llama-family decoders (tests/python/tiny_decoders.py): one process builds the four
# checkpoints, models/checkpoints/tiny-<arch>; their tokenizers are trained on the same text.
DECODER_ARCHS := llama qwen2 qwen3 llama2-sp
DECODER_CKPT_STAMP := $(CHECKPOINTS)/.decoders-stamp
DECODER_MODELS := $(DECODER_ARCHS:%=models/tiny-%/manifest.json)
# The Llama-family decoders that also get the quantized programs (issue 26;
# tests/quantized_generation.rs): Llama (untied head, GQA), Qwen2 (RMSNorm, a tied head,
# biases) and Qwen3 (q/k norms); each adds about 90 s of CPU. The SentencePiece Llama is
# the same graph as tiny-llama and is left out.
QUANTIZED_DECODERS := tiny-qwen2 tiny-llama tiny-qwen3
QUANTIZED_PROGRAMS := --programs portable,portable-nocache,xnnpack,xnnpack-nocache,xnnpack-kvin,xnnpack-int8,xnnpack-8da4w --group-size 32
decoder_programs_of = $(if $(filter $(1),$(QUANTIZED_DECODERS)),$(QUANTIZED_PROGRAMS),--programs portable$(,)portable-nocache$(,)xnnpack$(,)xnnpack-nocache$(,)xnnpack-kvin)
GPT2_FIGURES_CKPT := $(CHECKPOINTS)/gpt2-random
GPT2_FIGURES_MODEL := models/gpt2-random

empty :=
space := $(empty) $(empty)
, := ,
task_of = $(if $(filter %-mlm,$(1)),fill-mask,text-classification)
programs_of = $(if $(filter tiny-distilbert-mlm,$(1)),portable$(,)xnnpack$(,)xnnpack-int8$(,)xnnpack-static,portable$(,)xnnpack)

# Transformers' own chat templates, ids and streamed text of the decoder checkpoints (tests/chat.rs).
CHAT_REFERENCES := $(DECODER_ARCHS:%=$(CHECKPOINTS)/tiny-%/chat_reference.json)
# The eager Llama-family tests' checkpoints and transformers' prefill logits and greedy ids (tests/eager_llama.rs).
EAGER_LLAMA := models/eager-llama
# A program from ExecuTorch's own LLM flow, with a custom operator (tests/missing_kernels.rs).
LLM_FLOW := models/llm-flow
# Optimum's merged decoder file (an If on use_cache_branch, weights in external data),
# made from tiny-llama's model.onnx by tests/python/merged_decoder.py (tests/onnxruntime.rs).
OPTIMUM_MERGED := models/optimum-merged/decoder_model_merged.onnx
# transformers.js' float16 decoder file (float16 weights, caches and logits), made from
# tiny-llama's model.onnx by tests/python/fp16_decoder.py (tests/onnxruntime.rs).
ONNX_FP16 := models/onnx-fp16/model_fp16.onnx

.PHONY: test-models test-models-files models-figures models-gpt2-figures models-decoder-figures clean-test-models

test-models: $(VENV_STAMP) $(TEST_REQS_STAMP)
	@$(MAKE) --no-print-directory -j$(TEST_MODELS_JOBS) test-models-files

test-models-files: $(TINY_MODELS:%=%/manifest.json) $(COURSE)/programs.json $(GPT2_MODELS) $(DECODER_MODELS) \
  $(CHAT_REFERENCES) $(EAGER_LLAMA)/.stamp $(LLM_FLOW)/programs.json $(OPTIMUM_MERGED) $(ONNX_FP16)
	@:

$(OPTIMUM_MERGED): models/tiny-llama/manifest.json tests/python/merged_decoder.py | $(VENV_STAMP)
	$(VPY) tests/python/merged_decoder.py --onnx models/tiny-llama/model.onnx --out $(@D)

$(ONNX_FP16): models/tiny-llama/manifest.json tests/python/fp16_decoder.py | $(VENV_STAMP)
	$(VPY) tests/python/fp16_decoder.py --onnx models/tiny-llama/model.onnx --out $(@D)

$(LLM_FLOW)/programs.json: tests/python/llm_flow_program.py | $(VENV_STAMP)
	$(VPY) tests/python/llm_flow_program.py --out $(LLM_FLOW)

$(DECODER_CKPT_STAMP): tests/python/tiny_checkpoint.py tests/python/tiny_decoders.py $(GPT2_TOKENIZER_TEXT) | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch $(subst $(space),$(,),$(DECODER_ARCHS)) --size tiny --seed 0 --out $(CHECKPOINTS)
	@touch $@

# A static pattern: the encoders' models/tiny-%/manifest.json rule would match these too.
$(DECODER_MODELS): models/tiny-%/manifest.json: $(DECODER_CKPT_STAMP) $(EXPORT_PY) assets/prompts.txt $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(CHECKPOINTS)/tiny-$* --task text-generation --max-seq-len 128 \
	  $(call decoder_programs_of,tiny-$*) --out models/tiny-$* --threads 1

# One process builds the four checkpoints (its imports cost more than the models).
$(TINY_CKPT_STAMP): tests/python/tiny_checkpoint.py | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch $(subst $(space),$(,),$(TINY_ARCHS)) --size tiny --seed 0 --out $(CHECKPOINTS)
	@touch $@

models/tiny-%/manifest.json: $(TINY_CKPT_STAMP) $(EXPORT_PY) assets/sentences.txt assets/fill-mask.txt $(TEST_REQS_STAMP)
	$(VPY) python/export.py --model $(CHECKPOINTS)/tiny-$* --task $(call task_of,$*) \
	  --programs $(call programs_of,tiny-$*) --out models/tiny-$* --threads 1

$(COURSE)/programs.json: $(TINY_CKPT_STAMP) python/export_course.py $(EXPORT_PY) assets/fill-mask.txt
	$(VPY) python/export_course.py --model $(CHECKPOINTS)/tiny-distilbert-mlm --out $(COURSE)

# The GPT-2 checkpoint has its own stamp: its tokenizer is trained on the assets text.
$(GPT2_CKPT)/.stamp: tests/python/tiny_checkpoint.py $(GPT2_TOKENIZER_TEXT) | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch gpt2 --size tiny --seed 0 --out $(GPT2_CKPT)
	@touch $@

models/tiny-gpt2/manifest.json: $(GPT2_CKPT)/.stamp $(EXPORT_PY) assets/prompts.txt $(TEST_REQS_STAMP) $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(GPT2_CKPT) --task text-generation --max-seq-len 64 \
	  --programs portable,portable-nocache,xnnpack,xnnpack-nocache,xnnpack-kvin,xnnpack-int8,xnnpack-8da4w --group-size 32 \
	  --out models/tiny-gpt2 --threads 1

# `make soak`'s generation soak (scripts/soak.sh; not in `make test`): the same tiny
# GPT-2 with L = 128, so that a prompt and 64 new tokens fit, with the float and
# quantized KV-cache programs (about 2 minutes of export).
models/soak-gpt2/manifest.json: $(GPT2_CKPT)/.stamp $(EXPORT_PY) assets/prompts.txt $(TEST_REQS_STAMP) $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(GPT2_CKPT) --task text-generation --max-seq-len 128 \
	  --programs portable,xnnpack,xnnpack-int8,xnnpack-8da4w --group-size 32 \
	  --out models/soak-gpt2 --threads 1

models/course-gpt2/programs.json: $(GPT2_CKPT)/.stamp python/export_course.py $(EXPORT_PY) assets/prompts.txt
	$(VPY) python/export_course.py --model $(GPT2_CKPT) --out models/course-gpt2 --len 32

models-figures: $(FIGURES_MODEL)/manifest.json

$(CHECKPOINTS)/distilbert-base-random/config.json: tests/python/tiny_checkpoint.py | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch distilbert-mlm --size distilbert-base --seed 0 --out $(CHECKPOINTS)/distilbert-base-random

$(FIGURES_MODEL)/manifest.json: $(CHECKPOINTS)/distilbert-base-random/config.json $(EXPORT_PY) assets/fill-mask.txt
	$(VPY) python/export.py --model $(CHECKPOINTS)/distilbert-base-random --task fill-mask --out $(FIGURES_MODEL) --no-check

models-gpt2-figures: $(GPT2_FIGURES_MODEL)/manifest.json

$(GPT2_FIGURES_CKPT)/.stamp: tests/python/tiny_checkpoint.py $(GPT2_TOKENIZER_TEXT) | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch gpt2 --size gpt2 --seed 0 --out $(GPT2_FIGURES_CKPT)
	@touch $@

$(GPT2_FIGURES_MODEL)/manifest.json: $(GPT2_FIGURES_CKPT)/.stamp $(EXPORT_PY) assets/prompts.txt $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(GPT2_FIGURES_CKPT) --task text-generation --max-seq-len 192 \
	  --programs portable,portable-nocache,xnnpack,xnnpack-nocache,xnnpack-int8,xnnpack-8da4w \
	  --out $(GPT2_FIGURES_MODEL) --no-check

# `make models-decoder-figures` (not in `make test`): SmolLM2-135M's and Qwen2.5-0.5B's
# published sizes with random weights (tests/python/tiny_decoders.py FIGURE_SIZES), text-generation
# with L = 192: the KV-cache programs (float32 and the two quantized XNNPACK ones) and
# XNNPACK's window (portable's window would take hours at these sizes). SmolLM2's width,
# 576, takes no group of 128 (the recipe's default): its 4-bit groups are 64. Like models-gpt2-figures it skips the check against transformers.
DECODER_FIGURES := smollm2-135m qwen2.5-0.5b
arch_of_figure = $(if $(filter smollm2-%,$(1)),llama,qwen2)
models-decoder-figures: $(DECODER_FIGURES:%=models/%-random/manifest.json)

$(DECODER_FIGURES:%=$(CHECKPOINTS)/%-random/.stamp): $(CHECKPOINTS)/%-random/.stamp: tests/python/tiny_checkpoint.py tests/python/tiny_decoders.py $(GPT2_TOKENIZER_TEXT) | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch $(call arch_of_figure,$*) --size $* --seed 0 --out $(CHECKPOINTS)/$*-random
	@touch $@

$(DECODER_FIGURES:%=models/%-random/manifest.json): models/%-random/manifest.json: $(CHECKPOINTS)/%-random/.stamp $(EXPORT_PY) assets/prompts.txt \
  $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(CHECKPOINTS)/$*-random --task text-generation --max-seq-len 192 \
	  --programs portable,xnnpack,xnnpack-nocache,xnnpack-int8,xnnpack-8da4w $(if $(filter smollm2-%,$*),--group-size 64) \
	  --out models/$*-random --no-check

$(CHAT_REFERENCES): $(CHECKPOINTS)/tiny-%/chat_reference.json: $(DECODER_CKPT_STAMP) tests/python/chat_reference.py assets/prompts.txt
	$(VPY) tests/python/chat_reference.py --checkpoint $(CHECKPOINTS)/tiny-$* --prompts assets/prompts.txt --out $(CHECKPOINTS)/tiny-$*

$(EAGER_LLAMA)/.stamp: tests/python/eager_llama_reference.py | $(VENV_STAMP)
	$(VPY) tests/python/eager_llama_reference.py --out $(EAGER_LLAMA)
	@touch $@

clean-test-models:
	rm -rf $(EAGER_LLAMA) $(LLM_FLOW) $(dir $(OPTIMUM_MERGED)) $(dir $(ONNX_FP16)) $(TINY_MODELS) $(COURSE) models/tiny-gpt2 models/soak-gpt2 models/course-gpt2 $(DECODER_MODELS:%/manifest.json=%) $(CHECKPOINTS)/tiny-* $(TINY_CKPT_STAMP) $(DECODER_CKPT_STAMP) $(HUB_MODELS:%/manifest.json=%) $(CHECKPOINTS)/hub-* $(HUB_CKPT_STAMP)

# Issue 33: checkpoints as the hub ships them (tests/python/hub_layout.py): the tiny Llama, Qwen2
# and SentencePiece Llama in bfloat16, sharded with model.safetensors.index.json,
# chat_template.jinja, a position limit of 4096, an end-id list of two in
# generation_config.json (hub-llama2-sp: tokenizer.model only, no tokenizer.json), exported
# with the export's defaults (no --programs, no --max-seq-len); transformers' float32 greedy
# ids for them (tests/python/hub_reference.py, hub_reference.json beside each checkpoint) for
# tests/hub_checkpoints.rs.
HUB_ARCHS := llama qwen2 llama2-sp
HUB_CKPT_STAMP := $(CHECKPOINTS)/.hub-stamp
HUB_MODELS := $(HUB_ARCHS:%=models/hub-%/manifest.json)
HUB_REFERENCES := $(HUB_ARCHS:%=$(CHECKPOINTS)/hub-%/hub_reference.json)

test-models-files: $(HUB_MODELS) $(HUB_REFERENCES)

$(HUB_CKPT_STAMP): tests/python/tiny_checkpoint.py tests/python/tiny_decoders.py tests/python/hub_layout.py $(GPT2_TOKENIZER_TEXT) assets/prompts.txt | $(VENV_STAMP)
	$(VPY) tests/python/tiny_checkpoint.py --arch $(subst $(space),$(,),$(HUB_ARCHS)) --size hub --seed 0 --out $(CHECKPOINTS)
	@touch $@

$(HUB_MODELS): models/hub-%/manifest.json: $(HUB_CKPT_STAMP) $(EXPORT_PY) assets/prompts.txt $(GGUF_CONVERTER_STAMP) | build
	$(VPY) python/export.py --model $(CHECKPOINTS)/hub-$* --task text-generation --out models/hub-$* --threads 1

$(HUB_REFERENCES): $(CHECKPOINTS)/hub-%/hub_reference.json: $(HUB_CKPT_STAMP) tests/python/hub_reference.py
	$(VPY) tests/python/hub_reference.py --checkpoint $(CHECKPOINTS)/hub-$*

# Issue 33, a decode step that follows the filled length (tests/long_context.rs,
# docs/kv-cache.md): the hub-layout Qwen2 exported twice, L = 256 and L = 2048, the
# float KV-cache programs only (portable, xnnpack, xnnpack-kvin; about 70 s each); no GGUF files
# (models/hub-qwen2 has them from the same checkpoint).
CONTEXT_MODELS := models/context-256/manifest.json models/context-2048/manifest.json

test-models-files: $(CONTEXT_MODELS)

$(CONTEXT_MODELS): models/context-%/manifest.json: $(HUB_CKPT_STAMP) $(EXPORT_PY) assets/prompts.txt
	$(VPY) python/export.py --model $(CHECKPOINTS)/hub-qwen2 --task text-generation --max-seq-len $* \
	  --programs portable,xnnpack,xnnpack-kvin --no-gguf --out models/context-$* --threads 1
