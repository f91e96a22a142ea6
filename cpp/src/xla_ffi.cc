// XLA FFI wiring: decode XLA's call frame, forward to CallState.
#include "xla_ffi.h"

#include <memory>
#include <string_view>

#include "call_state.h"
#include "xla_ffi_attrs.h"

namespace cutecall::xla_ffi {
namespace ffi = ::xla::ffi;

namespace {

struct FfiState {
  static ffi::TypeId id;
  std::unique_ptr<CallState> call;
};
ffi::TypeId FfiState::id = {};
const XLA_FFI_TypeInfo kStateInfo = ffi::MakeTypeInfo<FfiState>();

ffi::Error ToFfi(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return ffi::Error::Success();
    case Code::kInvalidArgument:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, s.message());
    case Code::kFailedPrecondition:
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition, s.message());
    case Code::kNotFound:
      return ffi::Error(ffi::ErrorCode::kNotFound, s.message());
    case Code::kInternal:
      return ffi::Error(ffi::ErrorCode::kInternal, s.message());
  }
  return ffi::Error::Internal(s.message());
}

ErrorOr<BufferView> View(bool is_buffer, void* p, const char* what,
                         size_t i) {
  if (!is_buffer) {
    return InvalidArgument("cutecall: " + std::string(what) + " " +
                           std::to_string(i) + " is not a buffer");
  }
  auto* b = static_cast<XLA_FFI_Buffer*>(p);
  return BufferView{b->data, b->dims, b->rank, nullptr};
}

// Raw access to XLA's buffers: no per-operand diagnostics on the hot path.
struct Args : ffi::RemainingArgs {
  explicit Args(const ffi::RemainingArgs& r) : ffi::RemainingArgs(r) {}
  ErrorOr<BufferView> operator()(size_t i) const {
    size_t idx = offset() + i;
    return View(args()->types[idx] == XLA_FFI_ArgType_BUFFER,
                args()->args[idx], "operand", i);
  }
};

struct Rets : ffi::RemainingRets {
  explicit Rets(const ffi::RemainingRets& r) : ffi::RemainingRets(r) {}
  ErrorOr<BufferView> operator()(size_t i) const {
    size_t idx = offset() + i;
    return View(rets()->types[idx] == XLA_FFI_RetType_BUFFER,
                rets()->rets[idx], "result", i);
  }
};

// Reads attribute `name` into `out`. An absent optional attribute leaves
// `out` as it is.
template <typename T>
Status ReadAttr(const ffi::Dictionary& attrs, std::string_view name, T* out,
                bool optional = false) {
  if (!attrs.contains(name)) {
    if (optional) return Status::Ok();
    return InvalidArgument("cutecall: the custom call lacks attribute '" +
                           std::string(name) + "'");
  }
  ffi::ErrorOr<T> value = attrs.get<T>(name);
  if (!value.has_value()) {
    return InvalidArgument("cutecall: attribute '" + std::string(name) +
                           "': " + value.error().message());
  }
  *out = value.value();
  return Status::Ok();
}

}  // namespace

// Attributes are read from the dictionary, not bound one by one: XLA rejects
// a call whose attribute count differs from the binding's, and artifacts
// lowered for plan version 1 carry neither `scalars` nor `symbols` (both are
// optional here; a v2 plan with scalars then fails the length check).
Status DecodeAttributes(const ffi::Dictionary& dict, CallAttributes* out) {
  std::string_view module, key, function, kernel, operands, symbols;
  ffi::Span<const int64_t> plan, scalars;
  for (Status s : {ReadAttr(dict, "module", &module),
                   ReadAttr(dict, "key", &key),
                   ReadAttr(dict, "function", &function),
                   ReadAttr(dict, "kernel", &kernel),
                   ReadAttr(dict, "plan", &plan),
                   ReadAttr(dict, "operands", &operands),
                   ReadAttr(dict, "scalars", &scalars, /*optional=*/true),
                   ReadAttr(dict, "symbols", &symbols, /*optional=*/true)}) {
    if (!s.ok()) return s;
  }
  CallAttributes& attrs = *out;
  attrs.module = module;
  attrs.key = key;
  attrs.function = function;
  attrs.kernel = kernel;
  attrs.plan = plan.begin();
  attrs.plan_size = plan.size();
  attrs.operand_names = operands;
  attrs.symbol_names = symbols;
  attrs.scalars = scalars.begin();
  attrs.num_scalars = scalars.size();
  return Status::Ok();
}

namespace {

ffi::ErrorOr<std::unique_ptr<FfiState>> InstantiateImpl(
    ffi::Dictionary dict) {
  CallAttributes attrs;
  if (Status s = DecodeAttributes(dict, &attrs); !s.ok()) {
    return ffi::Unexpected(ToFfi(s));
  }
  ErrorOr<std::unique_ptr<CallState>> call = CallState::Instantiate(attrs);
  if (!call.ok()) return ffi::Unexpected(ToFfi(call.status()));
  // The module is loaded here, once per executable, and not in a prepare
  // stage: XLA calls a registered prepare stage of every custom call on
  // every execution, command-buffer replays included (200 calls in a graph
  // = 200 prepare calls per replay), which made the host, not the GPU, set
  // the pace of graph replays. The DSL runtime loads context-independent
  // CUDA libraries, so no stream or device context is needed yet.
  if (Status s = call.value()->Prepare(); !s.ok()) {
    return ffi::Unexpected(ToFfi(s));
  }
  auto state = std::make_unique<FfiState>();
  state->call = std::move(call).value();
  return state;
}

ffi::Error ExecuteImpl(void* stream, ffi::RemainingArgs args,
                       ffi::RemainingRets rets, FfiState* state) {
  if (state == nullptr || !state->call) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "cutecall: execute before instantiate");
  }
  return ToFfi(state->call->Execute(stream, args.size(), rets.size(),
                                    Args(args), Rets(rets)));
}

// Attributes (one instantiate handler serves both targets): module, key,
// function, kernel, plan, operands; scalars (int64 array) and symbols
// (string) for plan version 2.
XLA_FFI_DEFINE_HANDLER(kInstantiate, InstantiateImpl,
                       ffi::Ffi::BindInstantiate().Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER(kExecute, ExecuteImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .RemainingArgs()
                           .RemainingRets()
                           .Ctx<ffi::State<FfiState>>(),
                       {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER(kExecuteNoGraph, ExecuteImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .RemainingArgs()
                           .RemainingRets()
                           .Ctx<ffi::State<FfiState>>());

}  // namespace

XLA_FFI_Handler* InstantiateHandler() { return kInstantiate; }
XLA_FFI_Handler* ExecuteHandler() { return kExecute; }
XLA_FFI_Handler* ExecuteNoGraphHandler() { return kExecuteNoGraph; }

XLA_FFI_TypeId* StateTypeId() { return &FfiState::id; }
const XLA_FFI_TypeInfo* StateTypeInfo() { return &kStateInfo; }

}  // namespace cutecall::xla_ffi
