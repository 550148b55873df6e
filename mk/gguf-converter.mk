# llama.cpp's own converter, for the GGUF files of the model directories
# (python/runlens_export/gguf_files.py, docs/gguf.md): convert_hf_to_gguf.py with its
# conversion/ package and gguf-py/, as vendored in the llama-cpp-python source
# package. The sdist is fetched by the venv's pip (`pip download`, a package
# registry's ordinary client; never installed: that would compile llama.cpp),
# checked against its sha256, and only those paths (and llama.cpp's LICENSE) are
# unpacked into build/gguf-converter/llama.cpp. The stamp says which sdist it
# came from; a second run does nothing. `make gguf-converter` alone fetches it;
# the model directories' rules depend on the stamp.
# Included from the Makefile (uses its VPY, VENV_STAMP), before the rules that name
# GGUF_CONVERTER_STAMP.

GGUF_CONVERTER_VERSION := 0.3.36
GGUF_CONVERTER_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
GGUF_CONVERTER_BUILD := build/gguf-converter
GGUF_CONVERTER_SDIST := $(GGUF_CONVERTER_BUILD)/llama_cpp_python-$(GGUF_CONVERTER_VERSION).tar.gz
GGUF_CONVERTER_DIR := $(GGUF_CONVERTER_BUILD)/llama.cpp
GGUF_CONVERTER_STAMP := $(GGUF_CONVERTER_DIR)/.stamp
# what is unpacked, inside the sdist's vendor/llama.cpp/
GGUF_CONVERTER_PATHS := convert_hf_to_gguf.py conversion gguf-py LICENSE
gguf_sdist_ok = echo "$(GGUF_CONVERTER_SHA256)  $(1)" | sha256sum --check --status -

.PHONY: gguf-converter
gguf-converter: $(GGUF_CONVERTER_STAMP)

# Into a fresh folder first, so a broken or other download never sits at the sdist's name.
$(GGUF_CONVERTER_SDIST): | $(VENV_STAMP)
	@rm -rf $(GGUF_CONVERTER_BUILD)/download && mkdir -p $(GGUF_CONVERTER_BUILD)/download
	$(VPY) -m pip download --progress-bar off --no-deps --no-binary llama-cpp-python llama-cpp-python==$(GGUF_CONVERTER_VERSION) \
	  -d $(GGUF_CONVERTER_BUILD)/download
	@$(call gguf_sdist_ok,$(GGUF_CONVERTER_BUILD)/download/$(@F)) || { \
	  echo "error: $(@F) does not have the sha256 mk/gguf-converter.mk pins ($(GGUF_CONVERTER_SHA256))"; exit 1; }
	@mv $(GGUF_CONVERTER_BUILD)/download/$(@F) $@ && rm -rf $(GGUF_CONVERTER_BUILD)/download

$(GGUF_CONVERTER_STAMP): $(GGUF_CONVERTER_SDIST)
	@$(call gguf_sdist_ok,$<) || { echo "error: $< does not have the sha256 mk/gguf-converter.mk pins; delete it and re-run"; exit 1; }
	@rm -rf $(GGUF_CONVERTER_DIR) $(GGUF_CONVERTER_DIR).tmp && mkdir -p $(GGUF_CONVERTER_DIR).tmp
	tar -xzf $< -C $(GGUF_CONVERTER_DIR).tmp --strip-components=3 \
	  $(GGUF_CONVERTER_PATHS:%=llama_cpp_python-$(GGUF_CONVERTER_VERSION)/vendor/llama.cpp/%)
	@mv $(GGUF_CONVERTER_DIR).tmp $(GGUF_CONVERTER_DIR)
	@echo "llama-cpp-python $(GGUF_CONVERTER_VERSION) sdist, sha256 $(GGUF_CONVERTER_SHA256): $(GGUF_CONVERTER_PATHS)" > $@
