# Included by CMake after every project() of llama.cpp's build (CMAKE_PROJECT_INCLUDE,
# set for the aarch64 cross build in mk/aarch64.mk): ggml's CPU kernels for the
# Raspberry Pi 5's Cortex-A76, with the int8 dot product (Q4_0's and Q8_0's fast
# paths, the Q4_0 repack) and float16 arithmetic. llama-cpp-sys-2's build script
# passes -DGGML_CPU_ARM_ARCH=armv8-a for every non-native aarch64 Linux build;
# this replaces that cache entry before ggml reads it. runlens checks the CPU
# for dotprod and fp16 before llama.cpp loads (src/backend/llamacpp/cpu.rs).
set(GGML_CPU_ARM_ARCH "armv8.2-a+dotprod+fp16" CACHE STRING "ggml-cpu -march for the Raspberry Pi 5" FORCE)
