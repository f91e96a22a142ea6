// cutecall/bundle.h — run precompiled kernels from C++, with no Python.
//
// Owns: opening a bundle written by cutecall.export (a directory holding
// manifest.txt and objects/<sha256>.o; format 3, docs/bundles.md), verifying
// it, loading its modules, and launching its kernels on a CUDA stream.
// Contract:
//   * Open verifies the manifest's own SHA-256 (and the pinned digest, if
//     given), the format and plan versions, each entry's fields and plan,
//     each entry against the GPU it will run on (its arch, and what its
//     kernel read of its device while traced: BundleOptions::device_arch,
//     ::device_properties, ::device), and that each object file is there
//     with its recorded size. Then it finds the DSL
//     runtime the bundle records (version and SHA-256; format 2): in order,
//     SetRuntimeLibraryPath's or $CUTECALL_DSL_RUNTIME, the path recorded
//     at export, the nvidia-cutlass-dsl libs of the python3 on PATH
//     (src/bundle_runtime.h). A runtime whose digest differs is an error
//     naming both versions. Open loads that library (once per process).
//   * Modules load lazily: a kernel's module is loaded at its first Run (or
//     Load), once, even when many threads call it first at once. Its object
//     is read and its size, SHA-256 and ELF symbols checked right before it
//     loads: nothing is loaded whose digest was not checked. With
//     BundleOptions::eager_load (or $CUTECALL_BUNDLE_EAGER=1) Open instead
//     verifies every object, then loads every module, and fails if any
//     fails. Modules are shared through the ModuleRegistry, once per
//     process: a second Open of the same bundle loads nothing again.
//   * BundleKernel::Run packs pointers, dynamic extents/strides and scalars
//     into stack storage and launches on the given stream: once its module
//     is loaded it allocates nothing, takes no lock, never synchronizes,
//     and is safe to call from many threads.
//   * Every error is a Status naming the bundle path, and where it applies
//     the kernel, the file and the field. Nothing throws.
// The manifest format is versioned (kBundleFormatVersion); a change that old
// readers cannot read bumps it.
#ifndef CUTECALL_BUNDLE_H_
#define CUTECALL_BUNDLE_H_

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutecall/abi.h"
#include "cutecall/launch_plan.h"
#include "cutecall/status.h"

namespace cutecall {

class LoadedModule;  // cpp/src/module_registry.h (internal)

// The manifest format cutecall.export writes; this build reads
// kOldestBundleFormatVersion..kBundleFormatVersion. Format 2 adds the
// header field 'dsl-runtime' (the runtime the objects were compiled for),
// format 3 the entry field 'device-reads' (what the kernel read of its
// device while traced).
inline constexpr int kBundleFormatVersion = 3;
inline constexpr int kOldestBundleFormatVersion = 1;
inline constexpr const char* kBundleManifest = "manifest.txt";
static_assert(kBundleFormatVersion == 3,
              "docs/bundles.md and python/cutecall/bundle/_read.py describe "
              "format 3: update them with the version");

// A read-only view of `size` Ts: from a vector, an initializer list (valid
// for the full expression of a call) or a pointer and a count.
template <typename T>
struct Span {
  const T* data = nullptr;
  size_t size = 0;
  Span() = default;
  Span(const T* d, size_t n) : data(d), size(n) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"  // by design, see above
#endif
  Span(std::initializer_list<T> l) : data(l.begin()), size(l.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  Span(const std::vector<T>& v) : data(v.data()), size(v.size()) {}  // NOLINT
  const T& operator[](size_t i) const { return data[i]; }
};

// Runtime scalar values, bytes as the ABI wants them (docs/abi.md, Slots).
abi::Slot ScalarF32(float v);   // bit pattern in the low 4 bytes, upper zero
abi::Slot ScalarF64(double v);
abi::Slot ScalarI32(int32_t v);  // sign-extended to 8 bytes
abi::Slot ScalarI64(int64_t v);
abi::Slot ScalarBool(bool v);   // 0 or 1

// What a kernel may read of its GPU while it is traced (a persistent
// kernel sizes its grid by the SM count, a GEMM its tiles by the shared
// memory), as CUDA's device attributes give them (cudaDeviceProp's
// multiProcessorCount, sharedMemPerBlockOptin, sharedMemPerMultiprocessor,
// l2CacheSize). 0: unknown, not checked.
struct DeviceProperties {
  int sm_count = 0;
  int smem_per_block_optin = 0;  // bytes
  int smem_per_sm = 0;           // bytes
  int l2_bytes = 0;
};

struct BundleOptions {
  // Hex SHA-256 the manifest must have (its 'manifest-sha256' line). Pins
  // the bundle's content; empty: not pinned.
  std::string expected_digest;
  // The GPU's arch, e.g. "sm_90a" or "sm_90" (from cudaGetDeviceProperties):
  // entries that cannot run there are refused. Empty: not checked.
  std::string device_arch;
  // false: verify and list the entries but load no module and no runtime
  // (inspection on machines without a GPU); Run then fails.
  bool load_modules = true;
  // true: load every module in Open (all loading cost at startup, every
  // object error at Open) instead of at each kernel's first Run. Also on
  // when $CUTECALL_BUNDLE_EAGER is set to anything but "" or "0".
  bool eager_load = false;
  // New members are appended here, so that positional initializers
  // ({digest, arch, load_modules}) keep their meaning.
  // The GPU's properties: an entry whose kernel read another SM count, or
  // more shared memory than these, while it was traced (its manifest field
  // 'device-reads') is refused, naming the kernel, the property and both
  // values. Entries that read nothing load on any GPU their arch runs on.
  DeviceProperties device_properties = {};
  // A CUDA device ordinal, or -1: Open reads that GPU's arch and properties
  // from the CUDA driver (libcuda.so.1) for device_arch and
  // device_properties where they are left empty, and fails if it cannot.
  int device = -1;
};

// Where this process's bundle loading time went, since it started (all
// bundles, all threads; bench/cpp_bundle reports it). Times in ms of wall
// time, counts of events.
struct BundleLoadStats {
  int opens = 0;                 // Bundle::Open calls that read a manifest
  double manifest_ms = 0;        // their manifest reads and checks
  double runtime_choose_ms = 0;  // choosing the DSL runtime (identities)
  int runtime_dlopens = 0;       // 0 or 1: the DSL runtime's dlopen
  double runtime_dlopen_ms = 0;  // dlopen + symbol resolution
  int objects_verified = 0;      // objects read and checked
  double object_verify_ms = 0;   // reading, SHA-256 and ELF checks
  int modules_created = 0;       // CuteDSLRT_Module_Create_From_Bytes calls
  double module_create_ms = 0;   // their time, with Module_Get_Function
  std::vector<double> module_create_each_ms;  // each, in order (first 256)
  int modules_shared = 0;        // loads served by a module already live
};
BundleLoadStats GetBundleLoadStats();

// The DSL runtime a bundle's objects were compiled against (format 2's
// 'dsl-runtime' field): "4.8.1 cu13", its SHA-256 (hex) and the path it
// had at export. All empty for format 1 bundles.
struct BundleRuntime {
  std::string version;
  std::string sha256;
  std::string path;
};

// One kernel of a bundle. Owned by its Bundle.
class BundleKernel {
 public:
  // Launches the kernel on `stream` (a cudaStream_t).
  //   inputs:  one BufferView per kernel input (the JAX call's flat arrays).
  //   outputs: one per kernel result; results aliased to an input are not
  //            read (pass the input's view).
  //   scalars: one Slot per runtime scalar (ScalarF32(...), ...), in
  //            scalar_types() order.
  // BufferView::dims are extents; strides are in elements, nullptr meaning
  // compact in the layout the kernel was compiled for (row-major unless
  // exported otherwise). Compact operands given strides must be compact.
  Status Run(void* stream, Span<BufferView> inputs, Span<BufferView> outputs,
             Span<abi::Slot> scalars = {}) const;

  const std::string& name() const { return name_; }
  const std::string& arch() const { return arch_; }
  const LaunchPlan& plan() const { return plan_; }
  size_t num_inputs() const { return plan_.num_args(); }
  size_t num_outputs() const { return plan_.num_rets(); }
  // "Float32", "Int32", ... per runtime scalar; "?" where not recorded.
  const std::vector<std::string>& scalar_types() const { return scalar_types_; }
  // The scalars' names as exported ("" where not recorded).
  const std::vector<std::string>& scalar_names() const { return scalar_names_; }
  // The specialization key (hex).
  const std::string& key() const { return key_; }
  // What the kernel read of its device while traced, e.g. {"sm_count",
  // 132}, in manifest order; empty when it read nothing.
  const std::vector<std::pair<std::string, int64_t>>& device_reads() const {
    return device_reads_;
  }

  // Loads the kernel's module now if it is not loaded yet (what the first
  // Run does): reads its object, checks its size, SHA-256 and ELF symbols,
  // loads it through the ModuleRegistry. Thread-safe; once it succeeded it
  // returns at once. A failure is returned again by the next Run or Load,
  // which tries again.
  Status Load() const;
  // Whether its module is loaded (at Open when eager, else at first use).
  bool loaded() const {
    return module_.load(std::memory_order_acquire) != nullptr;
  }

  ~BundleKernel();
  BundleKernel(const BundleKernel&) = delete;
  BundleKernel& operator=(const BundleKernel&) = delete;

 private:
  friend class Bundle;
  struct Source;  // where its object is, and the load's lock (bundle.cc)
  BundleKernel(std::string name, std::string arch, LaunchPlan plan);
  Status CheckCompact(size_t op, const BufferView& b) const;
  Status LoadFrom(std::string_view verified_bytes) const;

  std::string name_;
  std::string arch_;
  LaunchPlan plan_;
  std::vector<std::string> scalar_types_;
  std::vector<std::string> scalar_names_;
  std::string key_;
  std::vector<std::pair<std::string, int64_t>> device_reads_;
  // Minor-to-major dims per plan operand; empty when not recorded.
  std::vector<std::vector<int32_t>> layouts_;
  // nullptr when opened with load_modules = false.
  std::unique_ptr<Source> source_;
  // The loaded module (owned by source_); nullptr until loaded. Run's only
  // look at loading state: one acquire load.
  mutable std::atomic<const LoadedModule*> module_{nullptr};
};

class Bundle {
 public:
  // Opens and verifies the bundle in directory `path`; its modules load at
  // each kernel's first Run (BundleOptions::eager_load: here, all).
  static ErrorOr<std::unique_ptr<Bundle>> Open(const std::string& path,
                                               const BundleOptions& options = {});

  // The kernel exported under `name`; NotFound lists the names there are.
  ErrorOr<const BundleKernel*> Find(std::string_view name) const;
  // The same without building an error: nullptr when there is none.
  const BundleKernel* FindOrNull(std::string_view name) const;
  std::vector<std::string> names() const;
  size_t size() const { return kernels_.size(); }
  const BundleKernel& kernel(size_t i) const { return *kernels_[i]; }
  // Unique in the process, never reused: caches key on it (typed headers).
  uint64_t id() const { return id_; }
  const BundleRuntime& runtime() const { return runtime_; }
  // The runtime library Open chose ("" when opened without loading).
  const std::string& runtime_library() const { return runtime_library_; }

  const std::string& path() const { return path_; }
  const std::string& digest() const { return digest_; }  // manifest-sha256
  const std::string& cutecall_version() const { return cutecall_version_; }
  const std::string& dsl_version() const { return dsl_version_; }

 private:
  Bundle() = default;
  std::string path_;
  std::string digest_;
  std::string cutecall_version_;
  std::string dsl_version_;
  BundleRuntime runtime_;
  std::string runtime_library_;
  uint64_t id_ = 0;
  std::vector<std::unique_ptr<BundleKernel>> kernels_;  // sorted by name
};

// Whether code compiled for `arch` ("sm_90a") runs on `device_arch`
// ("sm_90", suffix ignored): 'a' targets need the same major.minor, others
// the same major and at least the minor.
bool ArchRunsOn(std::string_view arch, std::string_view device_arch);

}  // namespace cutecall

#endif  // CUTECALL_BUNDLE_H_
