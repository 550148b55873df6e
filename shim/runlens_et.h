/*
 * runlens_et.h - the C ABI between runlens (Rust) and ExecuTorch's C++ Module API.
 *
 * bindgen reads only this header. Conventions:
 *   - every fallible call returns an int32 status: RL_OK (0), a positive
 *     ExecuTorch runtime::Error code (e.g. 0x23 InvalidProgram), or a negative
 *     RL_ERR_* code of the shim itself;
 *   - after a failure, rl_last_error() gives the message for the calling thread,
 *     including the ExecuTorch log lines emitted during that call;
 *   - no C++ exception ever leaves these functions;
 *   - an rl_module is used by one thread at a time (ExecuTorch's Module is not
 *     thread-safe); it may move between threads.
 */
#ifndef RUNLENS_ET_H
#define RUNLENS_ET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_OK 0
/** A C++ exception was caught at the boundary; see rl_last_error(). */
#define RL_ERR_EXCEPTION (-1)
/** The caller passed a null pointer, a bad size or a too-small buffer. */
#define RL_ERR_ARGUMENT (-2)
/** The program ran but its output is not one float tensor. */
#define RL_ERR_OUTPUT (-3)

typedef struct rl_module rl_module;

/** Copy the calling thread's last error message (NUL-terminated, cut to cap). Returns its full length. */
size_t rl_last_error(char *buf, size_t cap);

/** ExecuTorch's name for one of its error codes ("InvalidProgram"), or "Unknown". */
const char *rl_error_name(int32_t status);

/**
 * Route ExecuTorch's log through runlens: messages are kept for rl_last_error(),
 * and also written to stderr when echo is non-zero; and ExecuTorch's abort, so
 * that an abort reports (rl_abort_hook_set) and ends with exit status 134
 * instead of a silent SIGABRT. Call once, before loading.
 */
int32_t rl_log_init(int32_t echo);

/**
 * What runlens knows when ExecuTorch aborts the process (an ET_CHECK failed:
 * runtime_abort() is noreturn, so the runtime never returns to the caller).
 * Strings are NUL-terminated and valid only during the hook; program, method
 * and phase are "" when no shim call was under way on the aborting thread.
 */
typedef struct rl_abort_report {
  /** The .pte being loaded or run by the aborting thread. */
  const char *program;
  /** The method ("forward"). */
  const char *method;
  /** "loading" or "running". */
  const char *phase;
  /** Chain and instruction index being executed, or -1 when unknown (needs a traced module). */
  int64_t chain;
  int64_t instruction;
  /** ExecuTorch's own reason: its fatal log line(s) of this call, else its last one. */
  const char *reason;
} rl_abort_report;

/**
 * Called once, on the aborting thread, before the process ends with _exit(134).
 * Other threads that abort meanwhile wait for it. Without a hook the shim writes
 * the report to stderr itself. Set it before loading; null removes it.
 */
typedef void (*rl_abort_hook)(const rl_abort_report *report);
void rl_abort_hook_set(rl_abort_hook hook);

/** Resize ExecuTorch's shared thread pool (used by XNNPACK). Call before loading. */
int32_t rl_threadpool_set_threads(uint32_t threads);
/** The thread pool's current size (0 if it has none). */
uint32_t rl_threadpool_threads(void);

/**
 * Whether this process' ExecuTorch runtime has a kernel registered under the
 * operator name `name` ("aten::add.out", "llama::update_cache.out"), for any
 * dtype: 1 yes, 0 no. A program calling an operator without one fails to load.
 */
int32_t rl_registry_has_kernel(const char *name);
/** Whether a backend (delegate) named `name` ("XnnpackBackend") is registered: 1 yes, 0 no. */
int32_t rl_registry_has_backend(const char *name);

/**
 * Load a .pte (memory-mapped, verified with InternalConsistency) and its "forward"
 * method, then every other method it has. XNNPACK's weight cache is on for the
 * process from the first load: delegates of the same weights share one packed copy.
 * With trace non-zero an ETDump event tracer is attached (profiles, and the probe:
 * with a tracer an abort report names the instruction that was running).
 */
int32_t rl_module_load(const char *path, int32_t trace, rl_module **out);

/** Free a module (null is fine). */
void rl_module_destroy(rl_module *module);

/**
 * Run forward(input_ids, attention_mask), both int64 of shape [1, seq_len], or
 * forward(input_ids) when attention_mask is null, and copy the first output (a
 * float tensor) into out. out_len receives its element count; if it exceeds
 * out_cap, nothing is copied and RL_ERR_ARGUMENT is returned.
 */
int32_t rl_module_forward(rl_module *module, const int64_t *input_ids, const int64_t *attention_mask,
                          int64_t seq_len, float *out, size_t out_cap, size_t *out_len);

/** One int64 input tensor: rank sizes, data holds their product of values, row-major. */
typedef struct rl_long_tensor {
  const int64_t *data;
  const int64_t *sizes;
  size_t rank;
} rl_long_tensor;

/** The most inputs rl_module_execute takes, and the highest rank of each. */
#define RL_MAX_INPUTS 8
#define RL_MAX_RANK 4

/**
 * Run forward on n_inputs int64 tensors of any rank (1..RL_MAX_RANK, every size
 * at least 1): e.g. input_ids [1, S] and cache_position [S] for a decoder with
 * its KV cache inside. State the program keeps (mutable buffers) persists from
 * one call to the next. The first output (a float tensor) is copied into out as
 * rl_module_forward does.
 */
int32_t rl_module_execute(rl_module *module, const rl_long_tensor *inputs, size_t n_inputs, float *out,
                          size_t out_cap, size_t *out_len);

/** Element types of rl_tensor_in. */
#define RL_DTYPE_LONG 0
#define RL_DTYPE_FLOAT 1

/** One input of rl_module_run_method: data holds the product of sizes values of dtype, row-major. */
typedef struct rl_tensor_in {
  int32_t dtype;
  void *data;
  const int64_t *sizes;
  size_t rank;
} rl_tensor_in;

/** One float output: valid until the module's next run, load or destroy. */
typedef struct rl_tensor_out {
  const float *data;
  int64_t sizes[RL_MAX_RANK];
  size_t rank;
  size_t numel;
} rl_tensor_out;

/** The most inputs rl_module_run_method takes (a decoder's KV cache is a few hundred). */
#define RL_MAX_METHOD_INPUTS 4096

/**
 * Run the method named `method` ("forward", "prefill"; loaded on first use) once
 * on n_inputs tensors, which must be every input it takes, in order (each of rank
 * 1..RL_MAX_RANK, every size at least 1). RL_DTYPE_LONG inputs are copied into the
 * module. RL_DTYPE_FLOAT inputs are not: the program is given the caller's memory
 * (for a program lowered with alloc_graph_input=False ExecuTorch reads it in place;
 * else it copies it into its own), so it must stay valid and untouched during the
 * call, and the program may write within each input's values if it mutates that
 * input. It need not outlive the call: the next run sets every input anew.
 * XNNPACK may read, never use, up to 16 bytes past a float input's end (its
 * XNN_EXTRA_BYTES): the input's allocation should extend that far (a prefix does).
 *
 * On success every output must be a float tensor (else RL_ERR_OUTPUT); *n_outputs
 * receives their count and outputs[0..count) describe them. If the count exceeds
 * out_cap, nothing is written to outputs and RL_ERR_ARGUMENT is returned: the
 * method has run, and calling again runs it again. An output that would point into
 * a float input is copied into the module, so outputs never alias the caller's
 * memory. rl_module_output_shape and rl_module_last_run_ns then describe this run.
 */
int32_t rl_module_run_method(rl_module *module, const char *method, const rl_tensor_in *inputs, size_t n_inputs,
                             rl_tensor_out *outputs, size_t out_cap, size_t *n_outputs);

/**
 * OpenMP's thread count for the calling thread (omp_get_max_threads), or 0 when
 * no OpenMP runtime is in the process. Each forward runs with 1 and restores it
 * (see SerialBlasScope in runlens_et.cpp). Never throws.
 */
int32_t rl_openmp_max_threads(void);

/**
 * Nanoseconds the last successful forward on this module (rl_module_forward, or an
 * iteration of rl_module_forward_loop) spent in the span the loop times (inputs
 * wrapped, Module::forward); 0 before the first or for a null module. The caller's
 * time around rl_module_forward minus this is the wrapper's own cost on that very
 * call. Never throws.
 */
uint64_t rl_module_last_run_ns(const rl_module *module);

/**
 * The sizes of the first output of the last successful forward: writes up to cap
 * of them into dims (may be null) and returns how many there are (0 before a run).
 */
size_t rl_module_output_shape(const rl_module *module, int64_t *dims, size_t cap);

/**
 * The same forward, iters times in a C++ loop, for measuring the Rust wrapper's own
 * overhead. Each iteration's wall time in nanoseconds goes to times_ns[i] (iters entries).
 */
int32_t rl_module_forward_loop(rl_module *module, const int64_t *input_ids, const int64_t *attention_mask,
                               int64_t seq_len, uint32_t iters, uint64_t *times_ns);

/**
 * The ETDump of the traced runs since the last call (module loaded with trace).
 * *data stays valid until the next call on this module or its destruction.
 */
int32_t rl_module_take_etdump(rl_module *module, const uint8_t **data, size_t *len);

/**
 * Makes the tracer (module loaded with trace) copy every intermediate output into a
 * buffer (ETDump debug events point into it, by offset). The buffer grows as the run
 * logs; buffer_bytes is reserved up front (an estimate: PlanInstructions::logged_output_bytes).
 * ExecuTorch's own fixed-size buffer would end the process when an output did not fit.
 */
int32_t rl_module_log_outputs(rl_module *module, size_t buffer_bytes);

/**
 * The part of rl_module_log_outputs' buffer the tracer has written; *data stays valid
 * until the module is destroyed or rl_module_log_outputs is called again.
 */
int32_t rl_module_debug_buffer(rl_module *module, const uint8_t **data, size_t *len);

/**
 * The PAL's conversion from ticks (ETDump's timestamps) to nanoseconds:
 * ns = ticks * numerator / denominator.
 */
int32_t rl_ticks_to_ns_ratio(uint64_t *numerator, uint64_t *denominator);

#ifdef __cplusplus
}
#endif

#endif /* RUNLENS_ET_H */
