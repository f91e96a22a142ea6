// tensor_launcher.cc — the course of one TensorLauncher call
// (tensor_launcher.h): describe the arguments, find their specialization,
// else ask `on_miss` once, then run; and the launcher's settings.
#include "tensor_launcher.h"

#include <chrono>
#include <stdexcept>

namespace nb = nanobind;

namespace cutecall::py {

nb::tuple PropsTuple(const LayoutProps& p) {
  nb::list extents, strides;
  for (int32_t d = 0; d < p.rank; ++d) {
    extents.append(int64_t(1) << p.extent_log2[d]);
    strides.append(int64_t(1) << p.stride_log2[d]);
  }
  return nb::make_tuple(p.unit_dim, p.align, p.wide, nb::tuple(extents),
                        nb::tuple(strides));
}

nb::object TensorLauncher::Call(nb::args args) {
  CallInfo call;
  Entry* e = Describe(args, &call) ? table_.Find(call) : nullptr;
  if (e == nullptr) {
    Miss(args, &call);  // raises, or registers this call's specialization
    if (!call.ok) {
      throw std::runtime_error("cutecall: kernel '" + name_ +
                               "': on_miss accepted arguments the launcher "
                               "cannot describe");
    }
    e = table_.Find(call);
    if (e == nullptr) {
      throw std::runtime_error("cutecall: kernel '" + name_ +
                               "': on_miss returned no specialization");
    }
  }
  Run(*e, args, call);
  return nb::none();
}

double TensorLauncher::TimeLaunches(size_t count, nb::args args) {
  Call(args);  // compiles if needed, and validates
  CallInfo call;
  if (!Describe(args, &call)) throw std::runtime_error("cutecall: not launchable");
  Entry* e = table_.Find(call);
  if (e == nullptr) throw std::runtime_error("cutecall: no specialization");
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < count; ++i) Run(*e, args, call);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void TensorLauncher::SetStatic(std::vector<uint16_t> masks) {
  if (masks.size() > kMaxArgs) throw nb::value_error("cutecall: too many masks");
  clear();
  static_ = std::move(masks);
}

void TensorLauncher::Miss(const nb::args& args, CallInfo* call) {
  nb::list props;
  for (size_t i = 0; i < args.size(); ++i) {
    // Described tensors only.
    const bool tensor = i < call->described && call->tag(i) == kTagTensor;
    props.append(tensor ? PropsTuple(ReadLayout(call->tensors[i]))
                        : nb::object(nb::none()));
  }
  if (!on_miss_.is_valid()) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': launcher was cleared by the garbage collector");
  }
  nb::object spec = on_miss_(args, props);
  // Python ran (and may have changed which extents are compiled in): read
  // the arguments again before registering under their signature.
  const bool ok = Describe(args, call);
  if (spec.is_none()) return;
  if (!ok) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': on_miss returned a specialization for "
                             "arguments the fast path cannot take");
  }
  table_.Register(*call, nb::cast<nb::tuple>(spec));
}

}  // namespace cutecall::py
