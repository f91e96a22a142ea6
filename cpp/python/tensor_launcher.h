// tensor_launcher.h — `_core.TensorLauncher`: launching compiled kernels
// with framework tensors (torch) straight from C++.
//
// Owns: per launch object, the per-call path: read each tensor through the
// DLPack C exchange API (no Python attribute access, no allocation), compute
// the call's signature, find its specialization, pack, and run on the
// framework's current stream of the tensors' device. What a signature holds
// is tensor_signature.h's; the specializations are launcher_table.h's.
// Contract: everything unusual — a new specialization, an unsupported
// argument, mixed devices, a CPU tensor — goes to the Python `on_miss`
// callback, which either raises the user-facing error or returns a compiled
// specialization; the call is then retried once. Runs under the GIL and makes
// no Python call between reading the table and launching, so the table
// cannot change under a launch.
// Files: tensor_launcher.cc (a call's course, running it, the Python type),
// tensor_launcher_args.cc (reading a call's arguments and pytrees),
// launcher_table.{h,cc} (the specializations), scalar_slot.{h,cc} (scalar
// arguments into ABI slots), tensor_signature.{h,cc} (what a tensor's
// specialization depends on), kernel_entry.{h,cc} (what `on_miss` returns).
#ifndef CUTECALL_PYTHON_TENSOR_LAUNCHER_H_
#define CUTECALL_PYTHON_TENSOR_LAUNCHER_H_

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "device_context.h"
#include "dlpack_exchange.h"
#include "launcher_table.h"
#include "tensor_signature.h"

namespace cutecall::py {

// Registers `_core.TensorLauncher` and the launcher limits.
void BindTensorLauncher(nanobind::module_& m);

class TensorLauncher {
 public:
  TensorLauncher(std::string name, std::vector<bool> constexpr_positions,
                 nanobind::callable on_miss)
      : name_(std::move(name)),
        constexpr_(std::move(constexpr_positions)),
        on_miss_(std::move(on_miss)) {}
  TensorLauncher(const TensorLauncher&) = delete;
  TensorLauncher& operator=(const TensorLauncher&) = delete;

  // Launches `args`' specialization (tp_call); returns None.
  nanobind::object Call(nanobind::args args);

  // Benchmark aid: launches `args` `count` times from one C++ loop (the
  // call described and looked up once) and returns the seconds taken: the
  // per-launch cost of everything below Python.
  double TimeLaunches(size_t count, nanobind::args args);

  // How calls read objects of `type` from now on: "node" (a container:
  // `fields` in order), "scalar" (a CuTe DSL value: .value), "const" (a
  // compile-time value: by identity). Python registers them on a miss.
  void RegisterType(nanobind::handle type, const std::string& kind,
                    std::vector<std::string> fields);

  // tp_call of the Python type: the hot path, for `self` a TensorLauncher
  // instance (also called by eager_call.cc with one).
  static PyObject* TpCall(PyObject* self, PyObject* args, PyObject* kwargs);

  size_t size() const { return table_.size(); }
  void clear() { table_.Clear(); }
  const std::string& name() const { return name_; }

 private:
  // One call's arguments as read: their signature and leaves, the tensors,
  // the device.
  struct CallInfo : CallSignature {
    size_t described = 0;     // leaves read so far
    size_t containers = 0;
    int32_t device = -1;
    const dlpack::ExchangeApi* api = nullptr;  // of the first tensor
    bool ok = false;
  };

  // How calls read objects of a type Python registered (register_type).
  enum class TypeKind { kNode, kValueScalar, kConst };
  struct TypeInfo {
    TypeKind kind = TypeKind::kConst;
    std::vector<nanobind::object> fields;  // kNode: interned field names
  };

  // A type's exchange API (cached), or null.
  const dlpack::ExchangeApi* ApiFor(PyTypeObject* type);
  // Fills `call` from the arguments; false when the fast path cannot take
  // them (Python decides what to do). Arguments may be pytrees: tuples and
  // lists (NamedTuples included), dicts, registered dataclasses, depth first.
  bool Describe(const nanobind::args& args, CallInfo* call);
  bool DescribeTree(PyObject* o, bool constexpr_position, int depth, CallInfo* call);
  bool DescribeLeaf(PyObject* o, bool constexpr_position, bool nested,
                    const TypeInfo* info, CallInfo* call);
  const TypeInfo* Registered(PyTypeObject* type) const;
  // Packs the call's leaves into `e`'s plan and launches.
  void Run(const Entry& e, const CallInfo& call);
  // Asks Python for the specialization of these arguments (a KernelEntry,
  // carrying its static masks) or its error, passing each described
  // tensor's LayoutProps; registers it under `call` as described (the
  // arguments are read again only if they could not be before: Python
  // registers the types of pytree arguments on a miss).
  void Miss(const nanobind::args& args, CallInfo* call);

  // The Python type's slots.
  static int Traverse(PyObject* self, visitproc visit, void* arg);
  static int Clear(PyObject* self);
  friend void BindTensorLauncher(nanobind::module_& m);

  std::string name_;
  std::vector<bool> constexpr_;
  nanobind::object on_miss_;
  LauncherTable table_;
  std::vector<std::pair<PyTypeObject*, const dlpack::ExchangeApi*>> apis_;
  std::vector<std::pair<PyTypeObject*, TypeInfo>> types_;
  PyTypeObject* last_type_ = nullptr;
  const dlpack::ExchangeApi* last_api_ = nullptr;
  const DriverTable* driver_ = nullptr;
};

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_TENSOR_LAUNCHER_H_
