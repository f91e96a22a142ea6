// tensor_launcher.cc — `_core.TensorLauncher`: launching compiled kernels
// with framework tensors (torch) straight from C++.
//
// Owns: per launch object, the table of specializations (signature ->
// prepared CallState + how each call argument fills the plan), and the
// per-call path: read each tensor through the DLPack C exchange API (no
// Python attribute access, no allocation), compute the call's signature,
// find its specialization, pack, and run on the framework's current stream
// of the tensors' device. What a signature holds is tensor_signature.h's.
// Contract: everything unusual — a new specialization, an unsupported
// argument, mixed devices, a CPU tensor — goes to the Python `on_miss`
// callback, which either raises the user-facing error or returns a compiled
// specialization; the call is then retried once. Runs under the GIL and makes
// no Python call between reading the table and launching, so the table
// cannot change under a launch. Modules of evicted specializations stay
// loaded for the life of the process (a CUDA graph may still launch them).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cutecall/call_state.h"
#include "cutecall/device_context.h"
#include "dlpack_exchange.h"
#include "raise.h"
#include "tensor_launcher.h"
#include "tensor_signature.h"

namespace nb = nanobind;

namespace cutecall::py {
namespace {

constexpr size_t kMaxArgs = 64;
constexpr size_t kMaxEntries = 64;

// How one call argument is used by a specialization.
// kUseOutput: a tensor the kernel writes (a launch whose outputs are all
// empty does nothing).
enum UseKind : int32_t {
  kUseTensor = 0, kUseScalar = 1, kUseIgnore = 2, kUseOutput = 3
};
// Runtime scalar types, in _signature.SCALAR_TYPES order.
enum ScalarType : int32_t {
  kBoolean, kInt8, kInt16, kInt32, kInt64, kUint8, kUint16, kUint32,
  kUint64, kFloat32, kFloat64, kNumScalarTypes
};
constexpr const char* kScalarNames[] = {
    "Boolean", "Int8", "Int16", "Int32", "Int64", "Uint8",
    "Uint16", "Uint32", "Uint64", "Float32", "Float64"};

struct Use {
  int32_t kind;
  int32_t index;  // operand (tensor) or scalar slot
  int32_t type;   // ScalarType for scalars
};

struct Entry {
  std::vector<int64_t> signature;
  std::unique_ptr<CallState> state;
  std::vector<Use> uses;
  size_t num_operands = 0;
  bool has_outputs = false;
  uint64_t last_used = 0;
};

// (unit_dim, align, wide, extent classes, stride classes): what Python
// needs to compile the specialization a tensor's signature names.
nb::tuple PropsTuple(const LayoutProps& p) {
  nb::list extents, strides;
  for (int32_t d = 0; d < p.rank; ++d) {
    extents.append(int64_t(1) << p.extent_log2[d]);
    strides.append(int64_t(1) << p.stride_log2[d]);
  }
  return nb::make_tuple(p.unit_dim, p.align, p.wide, nb::tuple(extents),
                        nb::tuple(strides));
}

// Modules of evicted entries: kept loaded until exit.
std::vector<std::shared_ptr<LoadedModule>>& PinnedModules() {
  static auto* pinned = new std::vector<std::shared_ptr<LoadedModule>>();
  return *pinned;
}

}  // namespace

class TensorLauncher {
 public:
  TensorLauncher(std::string name, std::vector<bool> constexpr_positions,
                 nb::callable on_miss)
      : name_(std::move(name)),
        constexpr_(std::move(constexpr_positions)),
        on_miss_(std::move(on_miss)) {}
  TensorLauncher(const TensorLauncher&) = delete;
  TensorLauncher& operator=(const TensorLauncher&) = delete;

  nb::object Call(nb::args args) {
    CallInfo call;
    Entry* e = Describe(args, &call) ? Find(call) : nullptr;
    if (e == nullptr) {
      Miss(args, &call);  // raises, or registers this call's specialization
      if (!call.ok) {
        throw std::runtime_error("cutecall: kernel '" + name_ +
                                 "': on_miss accepted arguments the launcher "
                                 "cannot describe");
      }
      e = Find(call);
      if (e == nullptr) {
        throw std::runtime_error("cutecall: kernel '" + name_ +
                                 "': on_miss returned no specialization");
      }
    }
    Run(*e, args, call);
    return nb::none();
  }

  // Benchmark aid: launches `args` `count` times from one C++ loop (the
  // call described and looked up once) and returns the seconds taken: the
  // per-launch cost of everything below Python.
  double TimeLaunches(size_t count, nb::args args) {
    Call(args);  // compiles if needed, and validates
    CallInfo call;
    if (!Describe(args, &call)) throw std::runtime_error("cutecall: not launchable");
    Entry* e = Find(call);
    if (e == nullptr) throw std::runtime_error("cutecall: no specialization");
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < count; ++i) Run(*e, args, call);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
        .count();
  }

  // Which extents/strides of each argument the kernel compiles in (the
  // static fallback): their values join the signature. Drops the entries
  // registered under the old masks.
  void SetStatic(std::vector<uint16_t> masks) {
    if (masks.size() > kMaxArgs) throw nb::value_error("cutecall: too many masks");
    clear();
    static_ = std::move(masks);
  }

  size_t size() const { return entries_.size(); }
  void clear() {
    for (auto& e : entries_) PinnedModules().push_back(e->state->module_owner());
    entries_.clear();
    last_ = nullptr;
  }
  const std::string& name() const { return name_; }

 private:
  struct CallInfo {
    size_t n = 0;
    dlpack::Tensor tensors[kMaxArgs];
    int64_t signature[kMaxArgs * kMaxArgWords];
    size_t sig_len = 0;
    size_t arg_at[kMaxArgs];  // where each argument's words start
    size_t described = 0;     // arguments read so far
    int32_t device = -1;
    const dlpack::ExchangeApi* api = nullptr;  // of the first tensor
    bool ok = false;

    int64_t tag(size_t i) const { return signature[arg_at[i]] & 0xff; }
  };

  const dlpack::ExchangeApi* ApiFor(PyTypeObject* type) {
    if (type == last_type_) return last_api_;
    for (auto& [t, api] : apis_) {
      if (t == type) {
        last_type_ = type;
        last_api_ = api;
        return api;
      }
    }
    const dlpack::ExchangeApi* api = nullptr;
    PyObject* cap = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type),
                                           dlpack::kAttribute);
    if (cap == nullptr) {
      PyErr_Clear();
    } else {
      void* p = PyCapsule_IsValid(cap, dlpack::kCapsuleName)
                    ? PyCapsule_GetPointer(cap, dlpack::kCapsuleName)
                    : nullptr;
      PyErr_Clear();
      auto* candidate = static_cast<const dlpack::ExchangeApi*>(p);
      if (candidate != nullptr &&
          candidate->header.version.major == dlpack::kMajorVersion &&
          candidate->dltensor_from_py_object_no_sync != nullptr &&
          candidate->current_work_stream != nullptr) {
        api = candidate;
      }
      Py_DECREF(cap);
    }
    Py_INCREF(reinterpret_cast<PyObject*>(type));  // the cache pins the type
    apis_.emplace_back(type, api);
    last_type_ = type;
    last_api_ = api;
    return api;
  }

  // Fills `call` from the arguments; false when the fast path cannot take
  // them (Python decides what to do).
  bool Describe(const nb::args& args, CallInfo* call) {
    call->n = args.size();
    call->sig_len = 0;
    call->described = 0;
    call->device = -1;
    call->api = nullptr;
    call->ok = false;
    if (call->n > kMaxArgs) return false;
    int64_t* sig = call->signature;
    for (size_t i = 0; i < call->n; ++i) {
      PyObject* o = args[i].ptr();
      const bool cx = i < constexpr_.size() && constexpr_[i];
      call->arg_at[i] = call->sig_len;
      if (o == Py_None) {
        sig[call->sig_len++] = kTagNone;
        sig[call->sig_len++] = 0;
      } else if (PyBool_Check(o)) {
        sig[call->sig_len++] = kTagBool;
        sig[call->sig_len++] = cx ? int64_t(o == Py_True) : 0;
      } else if (PyLong_Check(o)) {
        int64_t v = 0;
        if (cx) {
          int overflow = 0;
          v = PyLong_AsLongLongAndOverflow(o, &overflow);
          if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return false;
          }
        }
        sig[call->sig_len++] = kTagInt;
        sig[call->sig_len++] = v;
      } else if (PyFloat_Check(o)) {
        int64_t bits = 0;
        if (cx) {
          double d = PyFloat_AS_DOUBLE(o);
          std::memcpy(&bits, &d, sizeof bits);
        }
        sig[call->sig_len++] = kTagFloat;
        sig[call->sig_len++] = bits;
      } else {
        const dlpack::ExchangeApi* api = ApiFor(Py_TYPE(o));
        if (api == nullptr) return false;
        dlpack::Tensor& t = call->tensors[i];
        if (api->dltensor_from_py_object_no_sync(o, &t) != 0) {
          PyErr_Clear();
          return false;
        }
        if (t.device.device_type != dlpack::kDLCUDA || t.ndim < 1 ||
            t.ndim > abi::kMaxRank) {
          return false;
        }
        if (call->device < 0) {
          call->device = t.device.device_id;
          call->api = api;
        } else if (call->device != t.device.device_id) {
          return false;
        }
        const StaticMask mask = i < static_.size() ? static_[i] : 0;
        call->sig_len += AppendTensorSignature(t, mask, sig + call->sig_len);
      }
      call->described = i + 1;
    }
    call->ok = call->device >= 0;
    return call->ok;
  }

  Entry* Find(const CallInfo& call) {
    const size_t bytes = call.sig_len * sizeof(int64_t);
    auto match = [&](const Entry* e) {
      return e->signature.size() == call.sig_len &&
             std::memcmp(e->signature.data(), call.signature, bytes) == 0;
    };
    Entry* hit = nullptr;
    if (last_ != nullptr && match(last_)) {
      hit = last_;
    } else {
      for (auto& e : entries_) {
        if (match(e.get())) {
          hit = e.get();
          break;
        }
      }
    }
    if (hit != nullptr) {
      hit->last_used = ++clock_;
      last_ = hit;
    }
    return hit;
  }

  // Asks Python for the specialization of these arguments (or its error).
  void Miss(const nb::args& args, CallInfo* call) {
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
    Register(*call, nb::cast<nb::tuple>(spec));
  }

  // spec = (module, key, function, kernel, plan, operand_names,
  //         symbol_names, uses) with uses = [kind, index, type] * nargs.
  void Register(const CallInfo& call, const nb::tuple& spec) {
    if (spec.size() != 8) throw nb::value_error("on_miss: expected 8 fields");
    nb::bytes module = nb::cast<nb::bytes>(spec[0]);
    std::string key = nb::cast<std::string>(spec[1]);
    std::string function = nb::cast<std::string>(spec[2]);
    std::string kernel = nb::cast<std::string>(spec[3]);
    std::vector<int64_t> plan = nb::cast<std::vector<int64_t>>(spec[4]);
    std::string names = nb::cast<std::string>(spec[5]);
    std::string symbols = nb::cast<std::string>(spec[6]);
    std::vector<int32_t> flat = nb::cast<std::vector<int32_t>>(spec[7]);

    std::vector<int64_t> zeros(plan.size() > 4 ? size_t(std::max<int64_t>(plan[4], 0)) : 0);
    CallAttributes a;
    a.module = std::string_view(static_cast<const char*>(module.data()), module.size());
    a.key = key;
    a.function = function;
    a.kernel = kernel;
    a.plan = plan.data();
    a.plan_size = plan.size();
    a.operand_names = names;
    a.symbol_names = symbols;
    a.scalars = zeros.data();
    a.num_scalars = zeros.size();
    ErrorOr<std::unique_ptr<CallState>> state = CallState::Instantiate(a);
    if (!state.ok()) Raise(state.status());
    auto entry = std::make_unique<Entry>();
    entry->state = std::move(state).value();
    const LaunchPlan& p = entry->state->plan();
    entry->num_operands = p.operands().size();
    if (flat.size() != 3 * call.n) {
      throw nb::value_error(("cutecall: kernel '" + kernel + "': uses has " +
                             std::to_string(flat.size()) + " entries for " +
                             std::to_string(call.n) + " arguments").c_str());
    }
    std::vector<int> tensor_seen(entry->num_operands, 0);
    std::vector<int> scalar_seen(p.num_scalars(), 0);
    for (size_t i = 0; i < call.n; ++i) {
      Use u{flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
      const bool is_tensor = call.tag(i) == kTagTensor;
      const bool tensor_use = u.kind == kUseTensor || u.kind == kUseOutput;
      entry->has_outputs |= u.kind == kUseOutput;
      bool ok = u.kind == kUseIgnore ||
                (tensor_use && is_tensor && u.index >= 0 &&
                 size_t(u.index) < tensor_seen.size() && !tensor_seen[size_t(u.index)]++) ||
                (u.kind == kUseScalar && !is_tensor && u.index >= 0 &&
                 size_t(u.index) < scalar_seen.size() && u.type >= 0 &&
                 u.type < kNumScalarTypes && !scalar_seen[size_t(u.index)]++);
      if (!ok) {
        throw nb::value_error(("cutecall: kernel '" + kernel +
                               "': bad use for argument " + std::to_string(i))
                                  .c_str());
      }
      entry->uses.push_back(u);
    }
    for (int s : tensor_seen) {
      if (!s) throw nb::value_error("cutecall: a plan operand has no argument");
    }
    for (int s : scalar_seen) {
      if (!s) throw nb::value_error("cutecall: a plan scalar has no argument");
    }
    if (Status s = entry->state->Prepare(); !s.ok()) Raise(s);
    entry->signature.assign(call.signature, call.signature + call.sig_len);
    entry->last_used = ++clock_;
    if (entries_.size() >= kMaxEntries) Evict();
    entries_.push_back(std::move(entry));
  }

  void Evict() {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i) {
      if (entries_[i]->last_used < entries_[oldest]->last_used) oldest = i;
    }
    if (last_ == entries_[oldest].get()) last_ = nullptr;
    PinnedModules().push_back(entries_[oldest]->state->module_owner());
    entries_.erase(entries_.begin() + std::ptrdiff_t(oldest));
  }

  void Scalar(const Entry& e, size_t i, const Use& u, PyObject* o,
              abi::Slot* out) const {
    abi::Slot s;
    s.bits = 0;
    auto fail = [&](const std::string& why) {
      throw nb::value_error(("cutecall: kernel '" + e.state->plan().kernel_name() +
                             "': argument " + std::to_string(i) + " (" +
                             kScalarNames[u.type] + ") " + why)
                                .c_str());
    };
    switch (u.type) {
      case kBoolean:
        s.i64 = PyObject_IsTrue(o) == 1;
        break;
      case kFloat32:
      case kFloat64: {
        double d = PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          fail("= " + nb::cast<std::string>(nb::str(nb::handle(o))) +
               " is not representable as a float");
        }
        if (u.type == kFloat32) {
          s.f32 = float(d);
        } else {
          s.f64 = d;
        }
        break;
      }
      case kUint64: {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (PyErr_Occurred()) {
          PyErr_Clear();
          fail("is out of range [0, 2**64)");
        }
        s.bits = v;
        break;
      }
      default: {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        static constexpr int64_t kLo[] = {0, -128, -32768, INT32_MIN, INT64_MIN, 0, 0, 0};
        static constexpr int64_t kHi[] = {1, 127, 32767, INT32_MAX, INT64_MAX,
                                          255, 65535, int64_t(UINT32_MAX)};
        if (overflow != 0 || v < kLo[u.type] || v > kHi[u.type]) {
          PyErr_Clear();
          fail("= " + nb::cast<std::string>(nb::str(nb::handle(o))) +
               " is out of range [" + std::to_string(kLo[u.type]) + ", " +
               std::to_string(kHi[u.type]) + "]");
        }
        s.i64 = v;
      }
    }
    *out = s;
  }

  void Run(const Entry& e, const nb::args& args, const CallInfo& call) {
    BufferView views[kMaxArgs];
    abi::Slot scalars[abi::kMaxSlots];
    bool outputs_empty = e.has_outputs;
    for (size_t i = 0; i < call.n; ++i) {
      const Use& u = e.uses[i];
      if (u.kind == kUseTensor || u.kind == kUseOutput) {
        const dlpack::Tensor& t = call.tensors[i];
        views[u.index] = BufferView{
            static_cast<char*>(t.data) + t.byte_offset, t.shape, t.ndim,
            t.strides};
        if (u.kind == kUseOutput) outputs_empty &= IsEmpty(views[u.index]);
      } else if (u.kind == kUseScalar) {
        Scalar(e, i, u, args[i].ptr(), &scalars[u.index]);
      }
    }
    // Nothing to write (a kernel would size its grid from the outputs, and
    // a grid of 0 blocks is a CUDA launch error): no launch.
    if (outputs_empty) return;
    void* stream = nullptr;
    if (call.api->current_work_stream(dlpack::kDLCUDA, call.device, &stream) != 0) {
      throw nb::python_error();
    }
    if (driver_ == nullptr) {
      ErrorOr<const DriverTable*> d = Driver();
      if (!d.ok()) Raise(d.status());
      driver_ = d.value();
    }
    Status s = OnDevice(*driver_, call.device, [&] {
      return e.state->Launch(stream, views, e.num_operands, scalars);
    });
    if (!s.ok()) Raise(s);
  }

  // The Python callback may refer back to this launcher (a cycle): the type
  // takes part in garbage collection through these two slots.
  static int Traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    if (!nb::inst_ready(self)) return 0;
    Py_VISIT(nb::inst_ptr<TensorLauncher>(self)->on_miss_.ptr());
    return 0;
  }
  static int Clear(PyObject* self) {
    nb::inst_ptr<TensorLauncher>(self)->on_miss_.reset();
    return 0;
  }
  // tp_call: the hot path skips nanobind's overload dispatch; exceptions are
  // translated here, as nanobind would.
  static PyObject* TpCall(PyObject* self, PyObject* args, PyObject* kwargs) {
    if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
      PyErr_SetString(PyExc_TypeError,
                      "cutecall: a launcher takes positional arguments only");
      return nullptr;
    }
    try {
      return nb::inst_ptr<TensorLauncher>(self)
          ->Call(nb::borrow<nb::args>(args))
          .release()
          .ptr();
    } catch (nb::python_error& e) {
      e.restore();
    } catch (const nb::builtin_exception& e) {
      PyErr_SetString(e.type() == nb::exception_type::value_error
                          ? PyExc_ValueError
                          : PyExc_RuntimeError,
                      e.what());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
  }
  friend void BindTensorLauncher(nb::module_& m);

  std::string name_;
  std::vector<bool> constexpr_;
  std::vector<StaticMask> static_;
  nb::object on_miss_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;
  uint64_t clock_ = 0;
  std::vector<std::pair<PyTypeObject*, const dlpack::ExchangeApi*>> apis_;
  PyTypeObject* last_type_ = nullptr;
  const dlpack::ExchangeApi* last_api_ = nullptr;
  const DriverTable* driver_ = nullptr;
};

void BindTensorLauncher(nb::module_& m) {
  static PyType_Slot slots[] = {
      {Py_tp_traverse, reinterpret_cast<void*>(&TensorLauncher::Traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(&TensorLauncher::Clear)},
      {Py_tp_call, reinterpret_cast<void*>(&TensorLauncher::TpCall)},
      {0, nullptr}};
  nb::class_<TensorLauncher>(m, "TensorLauncher", nb::type_slots(slots),
      "Launches one kernel's specializations with DLPack-exchange tensors "
      "(torch) on the tensors' current stream. Calls go straight to C++; "
      "on_miss(args, props) is called for new or unsupported arguments.")
      .def(nb::init<std::string, std::vector<bool>, nb::callable>(),
           nb::arg("name"), nb::arg("constexpr_positions"), nb::arg("on_miss"))
      .def("__len__", &TensorLauncher::size)
      .def("time_launches", &TensorLauncher::TimeLaunches, nb::arg("count"),
           nb::arg("args"),
           "Seconds for `count` launches of `args` from one C++ loop.")
      .def("clear", &TensorLauncher::clear)
      .def("set_static", &TensorLauncher::SetStatic, nb::arg("masks"),
           "Per argument: bit d = extent d, bit 8+d = stride d compiled in.")
      .def_prop_ro("name", &TensorLauncher::name);
  m.def("layout_props",
        [](const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
           uint64_t address, int bits) {
          if (shape.empty() || shape.size() > size_t(abi::kMaxRank) ||
              strides.size() != shape.size() || bits < 1 || bits > 255) {
            throw nb::value_error("cutecall: layout_props: bad shape/strides/bits");
          }
          dlpack::Tensor t{};
          t.data = reinterpret_cast<void*>(address);
          t.ndim = int32_t(shape.size());
          t.dtype = {2, uint8_t(bits), 1};
          t.shape = const_cast<int64_t*>(shape.data());
          t.strides = const_cast<int64_t*>(strides.data());
          return PropsTuple(ReadLayout(t));
        },
        nb::arg("shape"), nb::arg("strides"), nb::arg("address"), nb::arg("bits"),
        "The layout facts the launcher reads from a tensor: (unit_dim, align, "
        "wide, extent classes, stride classes).");
  m.attr("MAX_LAUNCHER_ARGS") = kMaxArgs;
  m.attr("MAX_LAUNCHER_ENTRIES") = kMaxEntries;
}

}  // namespace cutecall::py
