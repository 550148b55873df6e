# `make test-models` (a prerequisite of `make test`): tiny random-weight
# checkpoints (python/tiny_checkpoint.py, seeded; sizes unlike MiniLM) exported
# through python/export.py, and programs made the way other pipelines make
# them (python/export_course.py), for the tests of issue 13:
#   models/tiny-bert-mlm, models/tiny-distilbert-mlm   fill-mask
#   models/tiny-bert-cls, models/tiny-distilbert-cls   text-classification
#     portable + xnnpack each; tiny-distilbert-mlm also xnnpack-int8 and xnnpack-static
#   models/course/   at-mask.pte (the course's [1, V] wrapper), per-position.pte
#     (input_ids alone, [1, S, V]), float-input.pte and rank4-output.pte (not
#     drivable), programs.json
# Every export runs its programs against transformers (ExecuTorch's Python
# runtime) and fails when they disagree. manifest.json / programs.json are the
# stamps: a second run does nothing. The exports run two at a time.
# `make models-figures` (not in `make test`): a DistilBERT-base-sized random
# checkpoint exported for fill-mask with all four programs, for the README's figures.
# It skips the check against transformers: with random weights this wide (0.2) at
# DistilBERT's size the float programs keep every top-1 token but their logits
# differ by up to 6e-2 (a relative 1e-4 and more), beyond the tiny models' tolerance;
# timings do not depend on it (README, "Random weights").
# Included from the Makefile (uses its VPY, VENV_STAMP).

TINY_ARCHS := bert-mlm distilbert-mlm bert-cls distilbert-cls
TINY_MODELS := $(TINY_ARCHS:%=models/tiny-%)
CHECKPOINTS := models/checkpoints
TINY_CKPT_STAMP := $(CHECKPOINTS)/.tiny-stamp
EXPORT_PY := python/export.py $(wildcard python/runlens_export/*.py)
COURSE := models/course
TEST_MODELS_JOBS ?= 2
FIGURES_MODEL := models/distilbert-base-random

empty :=
space := $(empty) $(empty)
, := ,
task_of = $(if $(filter %-mlm,$(1)),fill-mask,text-classification)
programs_of = $(if $(filter tiny-distilbert-mlm,$(1)),portable$(,)xnnpack$(,)xnnpack-int8$(,)xnnpack-static,portable$(,)xnnpack)

.PHONY: test-models test-models-files models-figures clean-test-models

test-models: $(VENV_STAMP)
	@$(MAKE) --no-print-directory -j$(TEST_MODELS_JOBS) test-models-files

test-models-files: $(TINY_MODELS:%=%/manifest.json) $(COURSE)/programs.json
	@:

# One process builds the four checkpoints (its imports cost more than the models).
$(TINY_CKPT_STAMP): python/tiny_checkpoint.py | $(VENV_STAMP)
	$(VPY) python/tiny_checkpoint.py --arch $(subst $(space),$(,),$(TINY_ARCHS)) --size tiny --seed 0 --out $(CHECKPOINTS)
	@touch $@

models/tiny-%/manifest.json: $(TINY_CKPT_STAMP) $(EXPORT_PY) assets/sentences.txt assets/fill-mask.txt
	$(VPY) python/export.py --model $(CHECKPOINTS)/tiny-$* --task $(call task_of,$*) \
	  --programs $(call programs_of,tiny-$*) --out models/tiny-$* --threads 1

$(COURSE)/programs.json: $(TINY_CKPT_STAMP) python/export_course.py $(EXPORT_PY) assets/fill-mask.txt
	$(VPY) python/export_course.py --model $(CHECKPOINTS)/tiny-distilbert-mlm --out $(COURSE)

models-figures: $(FIGURES_MODEL)/manifest.json

$(CHECKPOINTS)/distilbert-base-random/config.json: python/tiny_checkpoint.py | $(VENV_STAMP)
	$(VPY) python/tiny_checkpoint.py --arch distilbert-mlm --size distilbert-base --seed 0 --out $(CHECKPOINTS)/distilbert-base-random

$(FIGURES_MODEL)/manifest.json: $(CHECKPOINTS)/distilbert-base-random/config.json $(EXPORT_PY) assets/fill-mask.txt
	$(VPY) python/export.py --model $(CHECKPOINTS)/distilbert-base-random --task fill-mask --out $(FIGURES_MODEL) --no-check

clean-test-models:
	rm -rf $(TINY_MODELS) $(COURSE) $(CHECKPOINTS)/tiny-* $(TINY_CKPT_STAMP)
