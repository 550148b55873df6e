// runlens_et.cpp - implementation of runlens_et.h over ExecuTorch's Module API.
//
// Every extern "C" function body runs inside guard(), which turns any C++
// exception into RL_ERR_EXCEPTION with its message kept, so none reaches Rust.

#include "runlens_et.h"

#include <executorch/devtools/etdump/etdump_flatcc.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/platform.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

// The wheel ships libexecutorch_threadpool.so but not threadpool.h; these two
// declarations match the symbols it exports (checked with nm, executorch 1.5.1).
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool *get_threadpool();
}  // namespace executorch::extension::threadpool

namespace {

using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::Program;

// Message of the last failure on this thread, and the ExecuTorch log lines
// emitted on this thread since the current shim call began.
thread_local std::string t_last_error;
thread_local std::string t_call_log;
std::atomic<bool> g_echo_log{false};

void on_et_log(et_timestamp_t, et_pal_log_level_t level, const char *filename, const char *,
               size_t line, const char *message, size_t length) {
  std::string entry;
  entry.reserve(length + 64);
  entry += static_cast<char>(level);
  entry += ' ';
  const char *base = filename ? std::strrchr(filename, '/') : nullptr;
  entry += base ? base + 1 : (filename ? filename : "?");
  entry += ':' + std::to_string(line) + "] ";
  entry.append(message, length);
  while (!entry.empty() && (entry.back() == '\n' || entry.back() == '\r')) entry.pop_back();
  if (t_call_log.size() < 16384) {
    if (!t_call_log.empty()) t_call_log += '\n';
    t_call_log += entry;
  }
  if (g_echo_log.load(std::memory_order_relaxed)) std::fprintf(stderr, "%s\n", entry.c_str());
}

// What the calling thread is doing inside a shim call, for an abort report.
struct CallContext {
  const struct ::rl_module *module = nullptr;
  const char *phase = "";
};
thread_local CallContext t_context;

// Sets the calling thread's context for one shim call and clears it after.
class ContextScope {
 public:
  ContextScope(const struct ::rl_module *module, const char *phase) { t_context = {module, phase}; }
  ~ContextScope() { t_context = {}; }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;
};

std::atomic<rl_abort_hook> g_abort_hook{nullptr};

// ExecuTorch's fatal log lines of this call (ET_CHECK logs at level 'F' just
// before it aborts), else its last line.
std::string abort_reason() {
  std::string fatal, last;
  size_t start = 0;
  while (start < t_call_log.size()) {
    size_t end = t_call_log.find('\n', start);
    if (end == std::string::npos) end = t_call_log.size();
    std::string_view line(t_call_log.data() + start, end - start);
    if (!line.empty()) {
      last.assign(line);
      if (line.size() > 1 && line[0] == 'F' && line[1] == ' ') {
        if (!fatal.empty()) fatal += '\n';
        fatal.append(line);
      }
    }
    start = end + 1;
  }
  if (!fatal.empty()) return fatal;
  if (!last.empty()) return last;
  return "ExecuTorch logged no reason";
}

void fill_instruction(rl_abort_report *report);  // needs rl_module, defined below it

// ExecuTorch's abort (PAL): runtime_abort() is noreturn and the runtime is built
// without exceptions, so there is no way back into the caller; report, then end
// the process with the status a shell gives SIGABRT (134).
[[noreturn]] void on_et_abort() {
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    for (;;) pause();  // another thread is reporting; it ends the process
  }
  const std::string reason = abort_reason();
  rl_abort_report report{};
  report.program = "";
  report.method = "";
  report.phase = t_context.phase ? t_context.phase : "";
  report.chain = -1;
  report.instruction = -1;
  report.reason = reason.c_str();
  fill_instruction(&report);
  if (rl_abort_hook hook = g_abort_hook.load()) {
    hook(&report);
  } else {
    std::fprintf(stderr, "error: ExecuTorch aborted while %s %s (method %s): %s\n",
                 *report.phase ? report.phase : "in", *report.program ? report.program : "a program",
                 *report.method ? report.method : "?", report.reason);
  }
  std::fflush(stderr);
  std::fflush(stdout);
  _exit(134);
}

int32_t fail(int32_t status, std::string message) {
  if (!t_call_log.empty()) message += "\nExecuTorch log:\n" + t_call_log;
  t_last_error = std::move(message);
  return status;
}

int32_t fail_et(Error error, const std::string &what) {
  return fail(static_cast<int32_t>(error),
              what + ": ExecuTorch error " + std::to_string(static_cast<int>(error)) + " (" +
                  executorch::runtime::to_string(error) + ")");
}

template <typename F>
int32_t guard(const char *what, F &&body) noexcept {
  t_call_log.clear();
  try {
    return body();
  } catch (const std::exception &e) {
    return fail(RL_ERR_EXCEPTION, std::string(what) + ": C++ exception: " + e.what());
  } catch (...) {
    return fail(RL_ERR_EXCEPTION, std::string(what) + ": unknown C++ exception");
  }
}

}  // namespace

// BLAS inside ExecuTorch's kernels. The optimized kernel library calls the BLAS
// symbol sgemm_ (bmm, through executorch::cpublas::gemm). It ships its own, but runlens also loads
// libtorch, which exports sgemm_ from MKL and comes first in the process's symbol
// lookup, so those calls land in libtorch's MKL, threaded by OpenMP per calling
// thread. Tiny GEMMs such as the 12 per-head attention products gain nothing from
// threads; with another OpenMP team alive (the eager worker's), a two-thread call
// here took 12-15x longer (runlens profile; README "Whose BLAS"). ExecuTorch
// on its own runs that BLAS single-threaded, so each forward runs with one OpenMP
// thread on the calling thread and the caller's setting is restored after. Weak:
// without libgomp in the process (another libtorch build) this does nothing.
extern "C" int omp_get_max_threads(void) __attribute__((weak));
extern "C" void omp_set_num_threads(int) __attribute__((weak));

namespace {

class SerialBlasScope {
 public:
  SerialBlasScope() {
    if (omp_get_max_threads && omp_set_num_threads) {
      saved_ = omp_get_max_threads();
      if (saved_ != 1) omp_set_num_threads(1);
    }
  }
  ~SerialBlasScope() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialBlasScope(const SerialBlasScope &) = delete;
  SerialBlasScope &operator=(const SerialBlasScope &) = delete;

 private:
  int saved_ = 0;
};

}  // namespace

namespace {

// Where the tracer copies intermediate outputs (rl_module_log_outputs): a
// buffer that grows. ExecuTorch's own BufferDataSink ends the process (an
// ET_CHECK) when a tensor does not fit, and how much a run logs is known only
// after it (a kernel's out and its return value are both logged, a delegate
// call's every argument, the method's outputs again at the end). Offsets are
// 64-byte aligned from the start, as ExecuTorch's sinks keep them.
class GrowingSink final : public executorch::etdump::DataSinkBase {
 public:
  explicit GrowingSink(size_t reserve) { data_.reserve(reserve); }

  executorch::runtime::Result<size_t> write(const void *ptr, size_t length) override {
    if (length == 0) return static_cast<size_t>(-1);  // nothing stored, as ExecuTorch's sinks say it
    try {
      size_t offset = (data_.size() + 63) / 64 * 64;
      data_.resize(offset + length);  // zero-fills the alignment gap
      std::memcpy(data_.data() + offset, ptr, length);
      return offset;
    } catch (...) {
      // No exception may unwind into ExecuTorch; it aborts on this error instead.
      return executorch::runtime::Error::MemoryAllocationFailed;
    }
  }

  size_t get_used_bytes() const override { return data_.size(); }
  const uint8_t *data() const { return data_.data(); }

 private:
  std::vector<uint8_t> data_;
};

}  // namespace

struct rl_module {
  std::unique_ptr<Module> module;
  std::string path;
  std::string method = "forward";
  // Inputs are copied here: from_blob needs mutable memory, and the caller's stays untouched.
  std::vector<std::vector<int64_t>> input_data;
  std::vector<std::vector<executorch::aten::SizesType>> input_sizes;
  // run_method's int64 inputs, copied (they are small); its float inputs are the caller's.
  std::vector<std::vector<int64_t>> method_long_data;
  // Methods run_method gave caller memory: their Method points at it after the call,
  // so a run that does not set every input again would read freed memory.
  std::unordered_set<std::string> borrowing_methods;
  // run_method's outputs: rl_tensor_out points into them until the next run.
  std::vector<executorch::runtime::EValue> last_outputs;
  // Where each of last_outputs' values are: its own memory, or for an output that
  // pointed into a float input a copy in output_copies, so none aliases the caller's.
  std::vector<const float *> last_output_data;
  std::vector<std::vector<float>> output_copies;
  std::vector<int64_t> out_shape;  // sizes of the last successful run's first output
  void *etdump = nullptr;  // from ETDumpGen::get_etdump_data(), malloc'd by flatcc
  // Intermediate outputs the tracer copies (rl_module_log_outputs); the tracer
  // inside `module` points at it, so the destructor resets `module` first.
  std::unique_ptr<GrowingSink> debug_sink;
  uint64_t last_run_ns = 0;  // wall time of the last successful timed_run()

  ~rl_module() {
    module.reset();  // the tracer first: it points at debug_sink
    std::free(etdump);
  }

  // run(), timed: the one span both rl_module_forward (last_run_ns) and the
  // C++ loop of rl_module_forward_loop report.
  int32_t timed_run(const int64_t *input_ids, const int64_t *attention_mask, int64_t seq_len,
                    executorch::aten::Tensor *output) {
    auto start = std::chrono::steady_clock::now();
    int32_t status = run(input_ids, attention_mask, seq_len, output);
    auto end = std::chrono::steady_clock::now();
    if (status == RL_OK)
      last_run_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
    return status;
  }

  // Run forward once (input_ids, and attention_mask unless it is null); on
  // success *output is the first output tensor.
  int32_t run(const int64_t *input_ids, const int64_t *attention_mask, int64_t seq_len,
              executorch::aten::Tensor *output) {
    if (!input_ids || seq_len <= 0 || seq_len > (1 << 20))
      return fail(RL_ERR_ARGUMENT, "forward: null input or bad sequence length " + std::to_string(seq_len));
    const int64_t shape[2] = {1, seq_len};
    rl_long_tensor inputs[2] = {{input_ids, shape, 2}, {attention_mask, shape, 2}};
    return run_tensors(inputs, attention_mask ? 2 : 1, output);
  }

  // Run forward once on int64 tensors of any rank; on success *output is the
  // first output tensor.
  int32_t run_tensors(const rl_long_tensor *tensors, size_t n, executorch::aten::Tensor *output) {
    if (!tensors || n == 0 || n > RL_MAX_INPUTS)
      return fail(RL_ERR_ARGUMENT, "forward: " + std::to_string(n) + " inputs; 1 to " +
                                       std::to_string(RL_MAX_INPUTS) + " are taken");
    using executorch::aten::ScalarType;
    if (borrowing_methods.count(method)) {
      int32_t status = check_input_count(method, n);
      if (status != RL_OK) return status;
    }
    input_data.resize(n);
    input_sizes.resize(n);
    std::vector<executorch::extension::TensorPtr> held;
    std::vector<executorch::runtime::EValue> inputs;
    for (size_t i = 0; i < n; ++i) {
      const rl_long_tensor &t = tensors[i];
      if (!t.data || !t.sizes || t.rank == 0 || t.rank > RL_MAX_RANK)
        return fail(RL_ERR_ARGUMENT, "forward: input " + std::to_string(i) + " is null or of rank " +
                                         std::to_string(t.rank) + " (1 to " + std::to_string(RL_MAX_RANK) + ")");
      int64_t numel = 1;
      input_sizes[i].clear();
      for (size_t d = 0; d < t.rank; ++d) {
        if (t.sizes[d] < 1 || t.sizes[d] > (1 << 20) || numel > (1 << 20) / t.sizes[d])
          return fail(RL_ERR_ARGUMENT, "forward: input " + std::to_string(i) + " has a bad size " +
                                           std::to_string(t.sizes[d]) + " (dimension " + std::to_string(d) + ")");
        numel *= t.sizes[d];
        input_sizes[i].push_back(static_cast<executorch::aten::SizesType>(t.sizes[d]));
      }
      input_data[i].assign(t.data, t.data + numel);
      held.push_back(executorch::extension::from_blob(input_data[i].data(), input_sizes[i], ScalarType::Long));
      inputs.emplace_back(held.back());
    }
    SerialBlasScope serial_blas;
    ContextScope context(this, "running");
    auto result = module->execute(method, inputs);
    if (!result.ok()) return fail_et(result.error(), path + ": forward failed");
    if (result->empty() || !result->at(0).isTensor())
      return fail(RL_ERR_OUTPUT, path + ": forward returned no tensor");
    const auto &tensor = result->at(0).toTensor();
    if (tensor.scalar_type() != ScalarType::Float)
      return fail(RL_ERR_OUTPUT, path + ": forward returned a non-float tensor");
    *output = tensor;
    out_shape.assign(tensor.sizes().begin(), tensor.sizes().end());
    return RL_OK;
  }

  // Whether `name` takes exactly n inputs: ExecuTorch keeps an input that a run does
  // not set, and for an input that is not memory-planned that is a pointer.
  int32_t check_input_count(const std::string &name, size_t n) {
    auto meta = module->method_meta(name);
    if (!meta.ok()) return fail_et(meta.error(), path + ": no method '" + name + "'");
    if (meta->num_inputs() != n)
      return fail(RL_ERR_ARGUMENT, path + ": " + name + " takes " + std::to_string(meta->num_inputs()) +
                                       " inputs, got " + std::to_string(n));
    return RL_OK;
  }

  // rl_module_run_method: run `name` once on every input; on success last_outputs
  // holds its outputs, each a float tensor of rank <= RL_MAX_RANK.
  int32_t run_method(const std::string &name, const rl_tensor_in *tensors, size_t n) {
    using executorch::aten::ScalarType;
    if (!tensors || n == 0 || n > RL_MAX_METHOD_INPUTS)
      return fail(RL_ERR_ARGUMENT, path + ": " + name + ": " + std::to_string(n) + " inputs; 1 to " +
                                       std::to_string(RL_MAX_METHOD_INPUTS) + " are taken");
    // Checked before ExecuTorch sees any: sizes bound the memory it reads.
    std::vector<std::vector<executorch::aten::SizesType>> sizes(n);
    std::vector<size_t> numels(n);
    for (size_t i = 0; i < n; ++i) {
      const rl_tensor_in &t = tensors[i];
      const std::string at = path + ": " + name + ": input " + std::to_string(i);
      if (t.dtype != RL_DTYPE_LONG && t.dtype != RL_DTYPE_FLOAT)
        return fail(RL_ERR_ARGUMENT, at + " has unknown dtype " + std::to_string(t.dtype));
      if (!t.data || !t.sizes) return fail(RL_ERR_ARGUMENT, at + " is null");
      if (t.rank == 0 || t.rank > RL_MAX_RANK)
        return fail(RL_ERR_ARGUMENT, at + " has rank " + std::to_string(t.rank) + " (1 to " +
                                         std::to_string(RL_MAX_RANK) + ")");
      int64_t numel = 1;
      for (size_t d = 0; d < t.rank; ++d) {
        if (t.sizes[d] < 1 || t.sizes[d] > (1 << 24) || numel > (int64_t{1} << 28) / t.sizes[d])
          return fail(RL_ERR_ARGUMENT, at + " has a bad size " + std::to_string(t.sizes[d]) + " (dimension " +
                                           std::to_string(d) + ")");
        numel *= t.sizes[d];
        sizes[i].push_back(static_cast<executorch::aten::SizesType>(t.sizes[d]));
      }
      numels[i] = static_cast<size_t>(numel);
    }
    // The name is the method an abort report gives, for this call only.
    struct MethodName {
      rl_module *self;
      std::string saved;
      ~MethodName() { self->method.swap(saved); }
    } method_name{this, name};
    method.swap(method_name.saved);
    if (!module->is_method_loaded(name)) {
      ContextScope context(this, "loading");
      Error err = module->load_method(name);
      if (err != Error::Ok) return fail_et(err, path + ": cannot load method '" + name + "'");
    }
    int32_t status = check_input_count(name, n);
    if (status != RL_OK) return status;

    auto start = std::chrono::steady_clock::now();
    method_long_data.resize(n);
    std::vector<executorch::extension::TensorPtr> held;  // what the inputs point at, alive through execute
    std::vector<executorch::runtime::EValue> inputs;
    held.reserve(n);
    inputs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const rl_tensor_in &t = tensors[i];
      void *data = t.data;
      ScalarType type = ScalarType::Float;
      if (t.dtype == RL_DTYPE_LONG) {
        const auto *values = static_cast<const int64_t *>(t.data);
        method_long_data[i].assign(values, values + numels[i]);
        data = method_long_data[i].data();
        type = ScalarType::Long;
      }
      held.push_back(executorch::extension::from_blob(data, std::move(sizes[i]), type));
      inputs.emplace_back(held.back());
    }
    borrowing_methods.insert(name);
    SerialBlasScope serial_blas;
    ContextScope context(this, "running");
    auto result = module->execute(name, inputs);
    auto end = std::chrono::steady_clock::now();
    if (!result.ok()) return fail_et(result.error(), path + ": " + name + " failed");
    last_outputs = std::move(*result);
    last_output_data.clear();
    output_copies.clear();
    for (size_t k = 0; k < last_outputs.size(); ++k) {
      const std::string at = path + ": " + name + ": output " + std::to_string(k);
      auto &value = last_outputs[k];
      if (!value.isTensor()) {
        char tag[executorch::runtime::kTagNameBufferSize];
        executorch::runtime::tag_to_string(value.tag, tag, sizeof tag);
        return fail(RL_ERR_OUTPUT, at + " is a " + tag + ", not a tensor");
      }
      const auto &tensor = value.toTensor();
      if (tensor.scalar_type() != ScalarType::Float)
        return fail(RL_ERR_OUTPUT, at + " is a " + executorch::runtime::toString(tensor.scalar_type()) +
                                       " tensor, not Float");
      if (static_cast<size_t>(tensor.dim()) > RL_MAX_RANK)
        return fail(RL_ERR_OUTPUT, at + " has rank " + std::to_string(tensor.dim()) + " (at most " +
                                       std::to_string(RL_MAX_RANK) + ")");
      // A program that returns an input (or a view of one) returns the caller's memory.
      const float *data = tensor.const_data_ptr<float>();
      auto begin = reinterpret_cast<uintptr_t>(data);
      auto stop = begin + tensor.nbytes();
      for (size_t i = 0; i < n && data && tensor.nbytes() > 0; ++i) {
        auto lo = reinterpret_cast<uintptr_t>(tensors[i].data);
        if (tensors[i].dtype == RL_DTYPE_FLOAT && begin < lo + numels[i] * sizeof(float) && lo < stop) {
          output_copies.emplace_back(data, data + tensor.numel());
          data = output_copies.back().data();  // a moved vector keeps its buffer
          break;
        }
      }
      last_output_data.push_back(data);
    }
    last_run_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
    if (!last_outputs.empty()) {
      const auto &first = last_outputs[0].toTensor();
      out_shape.assign(first.sizes().begin(), first.sizes().end());
    }
    return RL_OK;
  }
};

namespace {

void fill_instruction(rl_abort_report *report) {
  const rl_module *module = t_context.module;
  if (!module) return;
  report->program = module->path.c_str();
  report->method = module->method.c_str();
  auto *tracer = module->module ? module->module->event_tracer() : nullptr;
  // The method sets (chain, instruction) on its tracer around each instruction;
  // chain -1 means none is running (e.g. an abort while loading).
  if (tracer && tracer->current_chain_id() != executorch::runtime::kUnsetChainId) {
    report->chain = tracer->current_chain_id();
    report->instruction = static_cast<int64_t>(tracer->current_debug_handle());
  }
}

// XNNPACK's weight cache, on for the process (once, before the first load): the packed
// weights of every delegate are kept by their named data key, so two methods of one program
// (a decoder's forward and prefill) or two programs of the same weights (two columns) share
// one packed copy instead of packing each its own. Measured on SmolLM2-135M's float32
// program of two methods: 1.47 GB resident without, 0.88 GB with, and the second method's
// load no longer packs again (docs/kv-cache.md). A program of one method is unchanged.
// If XNNPACK is not in the process, set_option fails and nothing changes.
void share_packed_weights() {
  static const bool done = [] {
    executorch::runtime::BackendOptions<1> options;
    options.set_option("weight_cache_enabled", true);
    return executorch::runtime::set_option("XnnpackBackend", options.view()) == Error::Ok;
  }();
  (void)done;
}

}  // namespace

extern "C" {

void rl_abort_hook_set(rl_abort_hook hook) { g_abort_hook.store(hook); }

size_t rl_last_error(char *buf, size_t cap) {
  const std::string &msg = t_last_error;
  if (buf && cap > 0) {
    size_t n = msg.size() < cap - 1 ? msg.size() : cap - 1;
    std::memcpy(buf, msg.data(), n);
    buf[n] = '\0';
  }
  return msg.size();
}

const char *rl_error_name(int32_t status) {
  switch (status) {
    case RL_OK: return "Ok";
    case RL_ERR_EXCEPTION: return "CxxException";
    case RL_ERR_ARGUMENT: return "BadArgument";
    case RL_ERR_OUTPUT: return "UnexpectedOutput";
    default:
      if (status > 0 && status < 256) return executorch::runtime::to_string(static_cast<Error>(status));
      return "Unknown";
  }
}

int32_t rl_log_init(int32_t echo) {
  return guard("log init", [&] {
    g_echo_log.store(echo != 0);
    // Null entries keep ExecuTorch's defaults (clock, allocator).
    static bool registered = executorch::runtime::register_pal(executorch::runtime::PalImpl::create(
        nullptr, on_et_abort, nullptr, nullptr, on_et_log, nullptr, nullptr, __FILE__));
    return registered ? RL_OK : fail(RL_ERR_ARGUMENT, "ExecuTorch refused the log hook (register_pal)");
  });
}

int32_t rl_threadpool_set_threads(uint32_t threads) {
  return guard("thread pool", [&] {
    auto *pool = executorch::extension::threadpool::get_threadpool();
    if (!pool) return fail(RL_ERR_ARGUMENT, "ExecuTorch has no thread pool");
    if (threads == 0) return fail(RL_ERR_ARGUMENT, "thread count must be at least 1");
    if (!pool->_unsafe_reset_threadpool(threads))
      return fail(RL_ERR_ARGUMENT, "cannot resize ExecuTorch's thread pool to " + std::to_string(threads));
    return RL_OK;
  });
}

uint32_t rl_threadpool_threads(void) {
  uint32_t n = 0;
  guard("thread pool", [&] {
    auto *pool = executorch::extension::threadpool::get_threadpool();
    n = pool ? static_cast<uint32_t>(pool->get_thread_count()) : 0;
    return RL_OK;
  });
  return n;
}

int32_t rl_registry_has_kernel(const char *name) {
  int32_t found = 0;
  guard("kernel registry", [&] {
    if (!name) return fail(RL_ERR_ARGUMENT, "null operator name");
    // Every kernel by name, whatever its dtype key: registry_has_op_function
    // with no meta list would only find the kernels registered without a key.
    for (const auto &kernel : executorch::runtime::get_registered_kernels()) {
      if (kernel.name_ && std::strcmp(kernel.name_, name) == 0) {
        found = 1;
        break;
      }
    }
    return RL_OK;
  });
  return found;
}

int32_t rl_registry_has_backend(const char *name) {
  int32_t found = 0;
  guard("backend registry", [&] {
    if (!name) return fail(RL_ERR_ARGUMENT, "null backend name");
    found = executorch::runtime::get_backend_class(name) != nullptr ? 1 : 0;
    return RL_OK;
  });
  return found;
}

int32_t rl_module_load(const char *path, int32_t trace, rl_module **out) {
  return guard("load", [&] {
    share_packed_weights();
    if (!path || !out) return fail(RL_ERR_ARGUMENT, "load: null argument");
    *out = nullptr;
    auto handle = std::make_unique<rl_module>();
    handle->path = path;
    std::unique_ptr<executorch::runtime::EventTracer> tracer;
    if (trace) tracer = std::make_unique<executorch::etdump::ETDumpGen>();
    ContextScope context(handle.get(), "loading");
    handle->module = std::make_unique<Module>(handle->path, Module::LoadMode::Mmap, std::move(tracer));
    Error err = handle->module->load(Program::Verification::InternalConsistency);
    if (err != Error::Ok) return fail_et(err, handle->path + ": cannot load program");
    err = handle->module->load_method(handle->method);
    if (err != Error::Ok) return fail_et(err, handle->path + ": cannot load method '" + handle->method + "'");
    // Every other method too (a decoder's prefill), so that the load is all paid here,
    // not in the first run that calls it.
    auto names = handle->module->method_names();
    if (!names.ok()) return fail_et(names.error(), handle->path + ": cannot list its methods");
    for (const std::string &name : *names) {
      if (handle->module->is_method_loaded(name)) continue;
      err = handle->module->load_method(name);
      if (err != Error::Ok) return fail_et(err, handle->path + ": cannot load method '" + name + "'");
    }
    *out = handle.release();
    return RL_OK;
  });
}

void rl_module_destroy(rl_module *module) {
  guard("destroy", [&] {
    delete module;
    return RL_OK;
  });
}

int32_t rl_module_forward(rl_module *module, const int64_t *input_ids, const int64_t *attention_mask,
                          int64_t seq_len, float *out, size_t out_cap, size_t *out_len) {
  return guard("forward", [&] {
    if (!module || !out_len) return fail(RL_ERR_ARGUMENT, "forward: null argument");
    executorch::aten::Tensor output(nullptr);
    int32_t status = module->timed_run(input_ids, attention_mask, seq_len, &output);
    if (status != RL_OK) return status;
    size_t n = static_cast<size_t>(output.numel());
    *out_len = n;
    if (!out || n > out_cap)
      return fail(RL_ERR_ARGUMENT, module->path + ": output has " + std::to_string(n) +
                                       " values, buffer holds " + std::to_string(out_cap));
    std::memcpy(out, output.const_data_ptr<float>(), n * sizeof(float));
    return RL_OK;
  });
}

int32_t rl_module_execute(rl_module *module, const rl_long_tensor *inputs, size_t n_inputs, float *out,
                          size_t out_cap, size_t *out_len) {
  return guard("execute", [&] {
    if (!module || !out_len) return fail(RL_ERR_ARGUMENT, "execute: null argument");
    executorch::aten::Tensor output(nullptr);
    auto start = std::chrono::steady_clock::now();
    int32_t status = module->run_tensors(inputs, n_inputs, &output);
    auto end = std::chrono::steady_clock::now();
    if (status != RL_OK) return status;
    module->last_run_ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
    size_t n = static_cast<size_t>(output.numel());
    *out_len = n;
    if (!out || n > out_cap)
      return fail(RL_ERR_ARGUMENT, module->path + ": output has " + std::to_string(n) +
                                       " values, buffer holds " + std::to_string(out_cap));
    std::memcpy(out, output.const_data_ptr<float>(), n * sizeof(float));
    return RL_OK;
  });
}

int32_t rl_module_run_method(rl_module *module, const char *method, const rl_tensor_in *inputs, size_t n_inputs,
                             rl_tensor_out *outputs, size_t out_cap, size_t *n_outputs) {
  return guard("run method", [&] {
    if (!module || !method || !n_outputs) return fail(RL_ERR_ARGUMENT, "run method: null argument");
    int32_t status = module->run_method(method, inputs, n_inputs);
    if (status != RL_OK) return status;
    const auto &values = module->last_outputs;
    *n_outputs = values.size();
    if (values.size() > out_cap || (!outputs && !values.empty()))
      return fail(RL_ERR_ARGUMENT, module->path + ": " + method + " has " + std::to_string(values.size()) +
                                       " outputs, room was given for " + std::to_string(out_cap));
    for (size_t k = 0; k < values.size(); ++k) {
      const auto &tensor = values[k].toTensor();  // run_method checked: float, rank <= RL_MAX_RANK
      rl_tensor_out &out = outputs[k];
      out.data = module->last_output_data[k];
      out.rank = static_cast<size_t>(tensor.dim());
      for (size_t d = 0; d < RL_MAX_RANK; ++d) out.sizes[d] = d < out.rank ? tensor.size(d) : 0;
      out.numel = static_cast<size_t>(tensor.numel());
    }
    return RL_OK;
  });
}

int32_t rl_openmp_max_threads(void) { return omp_get_max_threads ? omp_get_max_threads() : 0; }

uint64_t rl_module_last_run_ns(const rl_module *module) { return module ? module->last_run_ns : 0; }

size_t rl_module_output_shape(const rl_module *module, int64_t *dims, size_t cap) {
  if (!module) return 0;
  const auto &shape = module->out_shape;
  for (size_t i = 0; dims && i < shape.size() && i < cap; ++i) dims[i] = shape[i];
  return shape.size();
}

int32_t rl_module_forward_loop(rl_module *module, const int64_t *input_ids, const int64_t *attention_mask,
                               int64_t seq_len, uint32_t iters, uint64_t *times_ns) {
  return guard("forward loop", [&] {
    if (!module || !times_ns) return fail(RL_ERR_ARGUMENT, "forward loop: null argument");
    executorch::aten::Tensor output(nullptr);
    for (uint32_t i = 0; i < iters; ++i) {
      int32_t status = module->timed_run(input_ids, attention_mask, seq_len, &output);
      if (status != RL_OK) return status;
      times_ns[i] = module->last_run_ns;
    }
    return RL_OK;
  });
}

int32_t rl_module_take_etdump(rl_module *module, const uint8_t **data, size_t *len) {
  return guard("etdump", [&] {
    if (!module || !data || !len) return fail(RL_ERR_ARGUMENT, "etdump: null argument");
    auto *tracer = dynamic_cast<executorch::etdump::ETDumpGen *>(module->module->event_tracer());
    if (!tracer) return fail(RL_ERR_ARGUMENT, module->path + ": module was loaded without a tracer");
    std::free(module->etdump);
    module->etdump = nullptr;
    auto result = tracer->get_etdump_data();
    if (!result.buf || result.size == 0) return fail(RL_ERR_OUTPUT, module->path + ": the tracer recorded nothing");
    module->etdump = result.buf;
    *data = static_cast<const uint8_t *>(result.buf);
    *len = result.size;
    return RL_OK;
  });
}

int32_t rl_module_log_outputs(rl_module *module, size_t buffer_bytes) {
  return guard("log outputs", [&] {
    if (!module) return fail(RL_ERR_ARGUMENT, "log outputs: null module");
    auto *tracer = dynamic_cast<executorch::etdump::ETDumpGen *>(module->module->event_tracer());
    if (!tracer) return fail(RL_ERR_ARGUMENT, module->path + ": module was loaded without a tracer");
    auto sink = std::make_unique<GrowingSink>(buffer_bytes);  // bad_alloc is caught by guard()
    tracer->set_data_sink(sink.get());
    module->debug_sink = std::move(sink);  // the previous sink, if any, goes after the tracer has let go
    tracer->set_event_tracer_debug_level(executorch::runtime::EventTracerDebugLogLevel::kIntermediateOutputs);
    return RL_OK;
  });
}

int32_t rl_module_debug_buffer(rl_module *module, const uint8_t **data, size_t *len) {
  return guard("debug buffer", [&] {
    if (!module || !data || !len) return fail(RL_ERR_ARGUMENT, "debug buffer: null argument");
    *data = module->debug_sink ? module->debug_sink->data() : nullptr;
    *len = module->debug_sink ? module->debug_sink->get_used_bytes() : 0;
    return RL_OK;
  });
}

int32_t rl_ticks_to_ns_ratio(uint64_t *numerator, uint64_t *denominator) {
  return guard("ticks ratio", [&] {
    if (!numerator || !denominator) return fail(RL_ERR_ARGUMENT, "ticks ratio: null argument");
    et_tick_ratio_t ratio = executorch::runtime::pal_ticks_to_ns_multiplier();
    *numerator = ratio.numerator;
    *denominator = ratio.denominator;
    return RL_OK;
  });
}

}  // extern "C"
