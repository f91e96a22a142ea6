// c_api.cc — cutecall/cutecall_c.h over cutecall/bundle.h. Every entry
// point catches everything (no exception crosses the C boundary) and keeps
// the detail of a failure in a thread-local string.
#include "cutecall/cutecall_c.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "cutecall/bundle.h"

static_assert(sizeof(cutecall_tensor) == sizeof(cutecall::BufferView) &&
                  offsetof(cutecall_tensor, dims) ==
                      offsetof(cutecall::BufferView, dims) &&
                  offsetof(cutecall_tensor, rank) ==
                      offsetof(cutecall::BufferView, rank) &&
                  offsetof(cutecall_tensor, strides) ==
                      offsetof(cutecall::BufferView, strides),
              "cutecall_tensor must match cutecall::BufferView");
static_assert(sizeof(cutecall_scalar) == sizeof(cutecall::abi::Slot));
// cutecall_open_options: where each version ends (LP64). Fields are only
// appended: these never change, a new version adds a line.
static_assert(sizeof(void*) != 8 ||
                  (offsetof(cutecall_open_options, expected_digest) == 8 &&
                   CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1 == 28 &&
                   CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V2 == 36),
              "cutecall_open_options: fields are only ever appended");
static_assert(CUTECALL_OPEN_OPTIONS_STRUCT_SIZE <= sizeof(cutecall_open_options));
static_assert(int(CUTECALL_ERROR_INVALID_ARGUMENT) ==
                  int(cutecall::Code::kInvalidArgument) &&
              int(CUTECALL_ERROR_FAILED_PRECONDITION) ==
                  int(cutecall::Code::kFailedPrecondition) &&
              int(CUTECALL_ERROR_NOT_FOUND) == int(cutecall::Code::kNotFound) &&
              int(CUTECALL_ERROR_INTERNAL) == int(cutecall::Code::kInternal));

struct cutecall_bundle {
  std::unique_ptr<cutecall::Bundle> bundle;
};
struct cutecall_kernel {};  // never defined: a cast BundleKernel*

namespace {

thread_local std::string g_last_error;

using cutecall::BundleKernel;

const BundleKernel* K(const cutecall_kernel* k) {
  return reinterpret_cast<const BundleKernel*>(k);
}
const cutecall_kernel* H(const BundleKernel* k) {
  return reinterpret_cast<const cutecall_kernel*>(k);
}

cutecall_status Fail(cutecall_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}
cutecall_status Fail(const cutecall::Status& s) {
  return Fail(cutecall_status(int(s.code())), s.message());
}
cutecall_status Null(const char* fn, const char* arg) {
  return Fail(CUTECALL_ERROR_INVALID_ARGUMENT,
              std::string("cutecall: ") + fn + ": argument '" + arg +
                  "' is NULL");
}

// Runs `body`, turning an exception (bad_alloc) into CUTECALL_ERROR_INTERNAL.
template <typename F>
cutecall_status Guard(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Fail(CUTECALL_ERROR_INTERNAL, std::string("cutecall: ") + fn +
                                             ": " + e.what());
  } catch (...) {
    return Fail(CUTECALL_ERROR_INTERNAL,
                std::string("cutecall: ") + fn + ": unknown exception");
  }
}

// `in` as the caller's header laid it out (cutecall_c.h, "Extensible
// structs"): its struct_size checked, the fields it lacks zero (defaults).
cutecall_status ReadOpenOptions(const cutecall_open_options* in,
                                cutecall::BundleOptions* o) {
  constexpr size_t kKnown = CUTECALL_OPEN_OPTIONS_STRUCT_SIZE;
  const std::string at = "cutecall: cutecall_bundle_open: field 'struct_size' "
                         "of argument 'options' is " +
                         std::to_string(in->struct_size);
  if (in->struct_size < CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1) {
    return Fail(CUTECALL_ERROR_INVALID_ARGUMENT,
                at + "; it must be at least " +
                    std::to_string(CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1) +
                    " (CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1): set it to "
                    "CUTECALL_OPEN_OPTIONS_STRUCT_SIZE");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = kKnown; i < in->struct_size; ++i) {
    if (bytes[i] != 0) {
      return Fail(CUTECALL_ERROR_INVALID_ARGUMENT,
                  at + ", larger than this cutecall's " +
                      std::to_string(kKnown) + ", and byte " +
                      std::to_string(i) + " beyond the fields it knows is "
                      "not zero: the caller sets an option of a newer "
                      "cutecall_c.h; link that cutecall, or zero the struct "
                      "before setting its fields");
    }
  }
  cutecall_open_options v;
  std::memset(&v, 0, sizeof v);
  std::memcpy(&v, in, std::min(in->struct_size, kKnown));
  if (v.expected_digest) o->expected_digest = v.expected_digest;
  if (v.device_arch) o->device_arch = v.device_arch;
  o->load_modules = v.load_modules != CUTECALL_LOAD_NONE;
  o->eager_load = v.load_modules == CUTECALL_LOAD_EAGER;
  if (v.check_device) {
    if (v.device < 0) {
      return Fail(CUTECALL_ERROR_INVALID_ARGUMENT,
                  "cutecall: cutecall_bundle_open: field 'device' of argument "
                  "'options' is " + std::to_string(v.device) +
                      "; with check_device set it must be a CUDA device "
                      "ordinal (>= 0)");
    }
    o->device = v.device;
  }
  return CUTECALL_OK;
}

const cutecall::OperandPlan* Operand(const cutecall_kernel* k, size_t i) {
  if (k == nullptr) return nullptr;
  const auto& plan = K(k)->plan();
  for (const auto& op : plan.operands()) {
    const size_t flat = op.source == cutecall::abi::Source::kArg
                            ? size_t(op.index)
                            : plan.num_args() + size_t(op.index);
    if (flat == i) return &op;
  }
  return nullptr;
}

}  // namespace

extern "C" {

const char* cutecall_status_name(cutecall_status s) {
  switch (s) {
    case CUTECALL_OK: return "CUTECALL_OK";
    case CUTECALL_ERROR_INVALID_ARGUMENT: return "CUTECALL_ERROR_INVALID_ARGUMENT";
    case CUTECALL_ERROR_FAILED_PRECONDITION: return "CUTECALL_ERROR_FAILED_PRECONDITION";
    case CUTECALL_ERROR_NOT_FOUND: return "CUTECALL_ERROR_NOT_FOUND";
    case CUTECALL_ERROR_INTERNAL: return "CUTECALL_ERROR_INTERNAL";
  }
  return "CUTECALL_UNKNOWN_STATUS";
}

const char* cutecall_status_message(cutecall_status s) {
  switch (s) {
    case CUTECALL_OK: return "success";
    case CUTECALL_ERROR_INVALID_ARGUMENT:
      return "an argument, operand, shape or bundle file is not what the "
             "kernel or the format needs";
    case CUTECALL_ERROR_FAILED_PRECONDITION:
      return "the environment is not ready: no matching CuTe DSL runtime, a "
             "GPU arch the kernel cannot run on, or modules not loaded";
    case CUTECALL_ERROR_NOT_FOUND:
      return "no such bundle directory, object file or kernel";
    case CUTECALL_ERROR_INTERNAL:
      return "the CuTe DSL runtime or CUDA failed to load or launch";
  }
  return "unknown status code";
}

const char* cutecall_last_error(void) { return g_last_error.c_str(); }

cutecall_status cutecall_bundle_open(const char* path,
                                     const cutecall_open_options* options,
                                     cutecall_bundle** out) {
  if (out != nullptr) *out = nullptr;
  if (path == nullptr) return Null("cutecall_bundle_open", "path");
  if (out == nullptr) return Null("cutecall_bundle_open", "out");
  return Guard("cutecall_bundle_open", [&] {
    cutecall::BundleOptions o;
    if (options != nullptr) {
      if (cutecall_status s = ReadOpenOptions(options, &o); s != CUTECALL_OK) {
        return s;
      }
    }
    auto b = cutecall::Bundle::Open(path, o);
    if (!b.ok()) return Fail(b.status());
    *out = new cutecall_bundle{std::move(b).value()};
    return CUTECALL_OK;
  });
}

void cutecall_bundle_close(cutecall_bundle* bundle) { delete bundle; }

const char* cutecall_bundle_digest(const cutecall_bundle* b) {
  return b ? b->bundle->digest().c_str() : "";
}

size_t cutecall_bundle_num_kernels(const cutecall_bundle* b) {
  return b ? b->bundle->size() : 0;
}

const cutecall_kernel* cutecall_bundle_kernel(const cutecall_bundle* b, size_t i) {
  return b && i < b->bundle->size() ? H(&b->bundle->kernel(i)) : nullptr;
}

cutecall_status cutecall_bundle_find(const cutecall_bundle* b, const char* name,
                                     const cutecall_kernel** out) {
  if (out != nullptr) *out = nullptr;
  if (b == nullptr) return Null("cutecall_bundle_find", "bundle");
  if (name == nullptr) return Null("cutecall_bundle_find", "name");
  if (out == nullptr) return Null("cutecall_bundle_find", "out");
  return Guard("cutecall_bundle_find", [&] {
    if (const BundleKernel* k = b->bundle->FindOrNull(name)) {
      *out = H(k);
      return CUTECALL_OK;
    }
    return Fail(b->bundle->Find(name).status());
  });
}

const char* cutecall_kernel_name(const cutecall_kernel* k) {
  return k ? K(k)->name().c_str() : "";
}
const char* cutecall_kernel_arch(const cutecall_kernel* k) {
  return k ? K(k)->arch().c_str() : "";
}
size_t cutecall_kernel_num_inputs(const cutecall_kernel* k) {
  return k ? K(k)->num_inputs() : 0;
}
size_t cutecall_kernel_num_outputs(const cutecall_kernel* k) {
  return k ? K(k)->num_outputs() : 0;
}
size_t cutecall_kernel_num_scalars(const cutecall_kernel* k) {
  return k ? K(k)->plan().num_scalars() : 0;
}
int64_t cutecall_kernel_operand_rank(const cutecall_kernel* k, size_t i) {
  const cutecall::OperandPlan* op = Operand(k, i);
  return op ? op->rank : -1;
}
int64_t cutecall_kernel_operand_elem_bytes(const cutecall_kernel* k, size_t i) {
  const cutecall::OperandPlan* op = Operand(k, i);
  return op ? op->elem_bytes : -1;
}
const char* cutecall_kernel_scalar_type(const cutecall_kernel* k, size_t i) {
  return k && i < K(k)->scalar_types().size() ? K(k)->scalar_types()[i].c_str()
                                              : "";
}
const char* cutecall_kernel_scalar_name(const cutecall_kernel* k, size_t i) {
  return k && i < K(k)->scalar_names().size() ? K(k)->scalar_names()[i].c_str()
                                              : "";
}

cutecall_status cutecall_kernel_load(const cutecall_kernel* kernel) {
  if (kernel == nullptr) return Null("cutecall_kernel_load", "kernel");
  return Guard("cutecall_kernel_load", [&] {
    cutecall::Status s = K(kernel)->Load();
    return s.ok() ? CUTECALL_OK : Fail(s);
  });
}

cutecall_status cutecall_kernel_run(const cutecall_kernel* kernel, void* stream,
                                    const cutecall_tensor* inputs,
                                    size_t num_inputs,
                                    const cutecall_tensor* outputs,
                                    size_t num_outputs,
                                    const cutecall_scalar* scalars,
                                    size_t num_scalars) {
  if (kernel == nullptr) return Null("cutecall_kernel_run", "kernel");
  if (inputs == nullptr && num_inputs) return Null("cutecall_kernel_run", "inputs");
  if (outputs == nullptr && num_outputs) return Null("cutecall_kernel_run", "outputs");
  if (scalars == nullptr && num_scalars) return Null("cutecall_kernel_run", "scalars");
  return Guard("cutecall_kernel_run", [&] {
    using cutecall::Span;
    cutecall::Status s = K(kernel)->Run(
        stream,
        Span<cutecall::BufferView>(
            reinterpret_cast<const cutecall::BufferView*>(inputs), num_inputs),
        Span<cutecall::BufferView>(
            reinterpret_cast<const cutecall::BufferView*>(outputs), num_outputs),
        Span<cutecall::abi::Slot>(
            reinterpret_cast<const cutecall::abi::Slot*>(scalars), num_scalars));
    return s.ok() ? CUTECALL_OK : Fail(s);
  });
}

cutecall_scalar cutecall_scalar_f32(float v) { return {cutecall::ScalarF32(v).bits}; }
cutecall_scalar cutecall_scalar_f64(double v) { return {cutecall::ScalarF64(v).bits}; }
cutecall_scalar cutecall_scalar_i32(int32_t v) { return {cutecall::ScalarI32(v).bits}; }
cutecall_scalar cutecall_scalar_i64(int64_t v) { return {cutecall::ScalarI64(v).bits}; }
cutecall_scalar cutecall_scalar_bool(int v) { return {cutecall::ScalarBool(v != 0).bits}; }

}  // extern "C"
