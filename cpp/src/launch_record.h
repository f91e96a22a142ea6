// launch_record.h — the grid and block of the last launch, for
// error messages that name them.
//
// A compiled module's launcher (DSL-generated host code) picks the grid,
// block and shared memory and calls _cudaLaunchKernelEx, which the CuTe DSL
// runtime's JIT links to its own definition. Before loading a module,
// cutecall renames that import to cutecall_launch_kex (same length, in
// place: elf.h) and names the shared object defining it to the
// runtime, so the launch passes through cutecall_launch_kex: it writes the
// launch's configuration to a thread-local record and forwards to the
// runtime's _cudaLaunchKernelEx.
//
// Owns: the shim, the per-thread record, its text, and the route
// (RouteLaunches: the renamed bytes and the library path, or why not).
// A module whose launcher gets its kernel from a CUDA library
// (_cudaLibraryGetKernel: a cudaKernel_t, which is a CUkernel) is renamed to
// cutecall_launch_drv instead, by default: the same record, then the
// driver's cuLaunchKernelEx with the same grid, block, shared memory, stream
// and attributes -- the CUDA runtime's own launch path, about a quarter of a
// microsecond of host time per launch, skipped. Where the driver refuses a
// launch, the runtime's _cudaLaunchKernelEx launches it (or returns its
// error as a cudaError_t, the code the module reports).
// Contract: the shims cost a few thread-local writes per launch and never
// fail on their own; with no forward target they return cudaErrorUnknown
// (999). Routing never fails a load: where it is impossible (the runtime
// exports no _cudaLaunchKernelEx, the module imports none, cutecall is
// linked statically into the executable, the name cannot be rewritten) the
// module is loaded as compiled and its grid and block stay unknown.
// The runtime resolves imports lazily and aborts the process on a missing
// one, so a module is routed only to a library checked, by dlopen of its
// path, to resolve cutecall_launch_kex to this process's shim.
#ifndef CUTECALL_SRC_LAUNCH_RECORD_H_
#define CUTECALL_SRC_LAUNCH_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "device_context.h"
#include "cutecall/runtime_table.h"
#include "cutecall/status.h"

// The launch call of modules loaded by cutecall (cudaLaunchKernelExC's
// signature). Records config's grid, block and dynamic shared memory on the
// calling thread, then returns what the forward target returns.
extern "C" __attribute__((visibility("default"))) int cutecall_launch_kex(
    const cutecall::CudaLaunchConfig* config, const void* kernel,
    void** args);

// The same record, then the driver's cuLaunchKernelEx (SetLaunchDriver) for
// `kernel`, a CUkernel; the forward target when the driver refuses it or
// none is set.
extern "C" __attribute__((visibility("default"))) int cutecall_launch_drv(
    const cutecall::CudaLaunchConfig* config, const void* kernel,
    void** args);

namespace cutecall {

// The import a compiled module launches through, and the shim it is
// renamed to (the rename rewrites the name in place: equal lengths).
inline constexpr std::string_view kLaunchImport = "_cudaLaunchKernelEx";
inline constexpr std::string_view kLaunchShim = "cutecall_launch_kex";
inline constexpr std::string_view kLaunchDriverShim = "cutecall_launch_drv";
static_assert(kLaunchImport.size() == kLaunchShim.size() &&
              kLaunchImport.size() == kLaunchDriverShim.size());
// A module importing this gets its kernels from a CUDA library: CUkernels,
// which the driver launches (cutecall_launch_drv).
inline constexpr std::string_view kLibraryKernelImport = "_cudaLibraryGetKernel";

// What the shim saw on this thread since the last ResetLaunchRecord.
struct LaunchRecord {
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint64_t dynamic_smem_bytes = 0;
  uint64_t launches = 0;  // calls since the reset; the fields above: the last
  int last_result = 0;    // what the last call returned (cudaError_t)
};

// Forgets this thread's launches (LoadedModule::Run calls it before each
// run of a module).
void ResetLaunchRecord();
// This thread's record.
LaunchRecord CurrentLaunchRecord();

// "grid (132, 1, 1), block (384, 1, 1), 197632 bytes dynamic shared
// memory", plus ", the last of N launches" when N > 1; "grid and block
// unknown (this call made no launch)" when the record holds none.
std::string DescribeLaunch(const LaunchRecord& record);

// Where the shim forwards: the runtime's _cudaLaunchKernelEx. Module loading
// sets it before loading a routed module. Returns the previous target.
LaunchKernelExFn SetLaunchForward(LaunchKernelExFn target);

// What cutecall_launch_drv launches with: the driver's cuLaunchKernelEx.
// Module loading sets it before loading a module routed to it. Returns the
// previous one.
DriverLaunchKernelExFn SetLaunchDriver(DriverLaunchKernelExFn target);

// A module's route through a shim: on success `bytes` is the module with
// kLaunchImport renamed to `shim` and `library` the shared object the
// runtime must link it against; otherwise `why_not` says why its grid and
// block stay unknown, e.g. "the CuTe DSL runtime exports no
// _cudaLaunchKernelEx".
//
// Which: CUTECALL_LAUNCH_RECORD=0 routes nothing (the runtime's own path).
// Otherwise a module that imports kLibraryKernelImport goes to
// kLaunchDriverShim when `driver` (the driver's cuLaunchKernelEx is at hand)
// and CUTECALL_LAUNCH_DRIVER is not 0; other modules go to kLaunchShim when
// CUTECALL_LAUNCH_RECORD=1 or launch blocking is on, and are not routed
// otherwise.
struct LaunchRoute {
  std::string bytes;
  std::string library;
  std::string_view shim;
  std::string why_not;
  bool routed() const { return why_not.empty(); }
};
LaunchRoute RouteLaunches(std::string_view module, const RuntimeTable& rt,
                          bool driver = false);

// The path of the shared object that defines cutecall_launch_kex in this
// process, checked to resolve to it when opened by that path; NotFound,
// naming the reason, when cutecall is linked into the executable itself
// (a statically linked program) or the object cannot be reopened.
ErrorOr<std::string> LaunchShimLibrary();

// Makes LaunchShimLibrary() answer `path` for the lifetime of the guard
// (tests: their executables link cutecall statically). Nests.
class ScopedLaunchShimLibraryOverride {
 public:
  explicit ScopedLaunchShimLibraryOverride(std::string path);
  ~ScopedLaunchShimLibraryOverride();
  ScopedLaunchShimLibraryOverride(const ScopedLaunchShimLibraryOverride&) =
      delete;
  ScopedLaunchShimLibraryOverride& operator=(
      const ScopedLaunchShimLibraryOverride&) = delete;

 private:
  std::string path_;
  const std::string* previous_;
};

}  // namespace cutecall

#endif  // CUTECALL_SRC_LAUNCH_RECORD_H_
