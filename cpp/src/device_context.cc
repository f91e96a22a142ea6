#include "device_context.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cutecall {
namespace {

struct DriverLoader {
  std::mutex mu;
  DriverTable table;
  bool loaded = false;
  const DriverTable* override_table = nullptr;
  // Primary contexts by device ordinal, for the real driver only.
  std::vector<void*> primaries;
};

DriverLoader& GetDriverLoader() {
  static DriverLoader* loader = new DriverLoader();  // used until exit
  return *loader;
}

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr) missing->append(missing->empty() ? "" : ", ").append(name);
}

}  // namespace

ErrorOr<const DriverTable*> Driver() {
  DriverLoader& l = GetDriverLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.override_table != nullptr) return l.override_table;
  if (l.loaded) return &l.table;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return FailedPrecondition(
        std::string("cutecall: the CUDA driver (libcuda.so.1) cannot be "
                    "loaded: ") + (err ? err : "unknown error"));
  }
  DriverTable t;
  std::string missing;
  Resolve(handle, "cuInit", &t.init, &missing);
  Resolve(handle, "cuCtxGetDevice", &t.ctx_get_device, &missing);
  Resolve(handle, "cuCtxGetCurrent", &t.ctx_get_current, &missing);
  Resolve(handle, "cuCtxSetCurrent", &t.ctx_set_current, &missing);
  Resolve(handle, "cuDevicePrimaryCtxRetain", &t.primary_ctx_retain, &missing);
  Resolve(handle, "cuStreamSynchronize", &t.stream_synchronize, &missing);
  Resolve(handle, "cuStreamIsCapturing", &t.stream_is_capturing, &missing);
  Resolve(handle, "cuGetErrorName", &t.get_error_name, &missing);
  Resolve(handle, "cuDeviceGet", &t.device_get, &missing);
  Resolve(handle, "cuDeviceGetAttribute", &t.device_get_attribute, &missing);
  Resolve(handle, "cuDriverGetVersion", &t.driver_get_version, &missing);
  // Optional (CUDA 12.0 on): where it is missing, launches stay the runtime's.
  t.launch_kernel_ex = reinterpret_cast<DriverLaunchKernelExFn>(
      dlsym(handle, "cuLaunchKernelEx"));
  if (!missing.empty()) {
    dlclose(handle);
    return FailedPrecondition("cutecall: libcuda.so.1 lacks " + missing);
  }
  if (int rc = t.init(0); rc != 0) {
    return internal::DriverError("cuInit", rc, -1);
  }
  l.table = t;
  l.loaded = true;  // the handle stays open for the life of the process
  return &l.table;
}

ErrorOr<std::string> DeviceArch(const DriverTable& d, int ordinal) {
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
  constexpr int kMajor = 75, kMinor = 76;
  int device = 0, major = 0, minor = 0;
  if (int rc = d.device_get(&device, ordinal); rc != 0) {
    return internal::DriverError("cuDeviceGet", rc, ordinal);
  }
  if (int rc = d.device_get_attribute(&major, kMajor, device); rc != 0) {
    return internal::DriverError("cuDeviceGetAttribute", rc, ordinal);
  }
  if (int rc = d.device_get_attribute(&minor, kMinor, device); rc != 0) {
    return internal::DriverError("cuDeviceGetAttribute", rc, ordinal);
  }
  return "sm_" + std::to_string(major) + std::to_string(minor) +
         (major >= 9 ? "a" : "");
}

ErrorOr<DeviceAttributes> ReadDeviceAttributes(const DriverTable& d, int ordinal) {
  // CUdevice_attribute codes (cuda.h): stable across CUDA releases.
  constexpr int kSmCount = 16, kL2 = 38, kMajor = 75, kMinor = 76,
                kSmemPerSm = 81, kSmemOptin = 97;
  int device = 0;
  if (int rc = d.device_get(&device, ordinal); rc != 0) {
    return internal::DriverError("cuDeviceGet", rc, ordinal);
  }
  DeviceAttributes a;
  const std::pair<int, int*> wanted[] = {
      {kSmCount, &a.sm_count}, {kSmemOptin, &a.smem_per_block_optin},
      {kSmemPerSm, &a.smem_per_sm}, {kL2, &a.l2_bytes},
      {kMajor, &a.major}, {kMinor, &a.minor}};
  for (const auto& [attribute, out] : wanted) {
    if (int rc = d.device_get_attribute(out, attribute, device); rc != 0) {
      return internal::DriverError("cuDeviceGetAttribute", rc, ordinal);
    }
  }
  return a;
}

namespace internal {

Status DriverError(const char* call, int code, int device) {
  std::string where = device >= 0 ? " for device " + std::to_string(device)
                                  : std::string();
  return Internal(std::string("cutecall: ") + call + " failed" + where +
                  ": CUDA driver error " + std::to_string(code));
}

ErrorOr<void*> PrimaryContext(const DriverTable& d, int device) {
  if (device < 0 || device > 1024) {
    return InvalidArgument("cutecall: device ordinal " +
                           std::to_string(device) + " is out of range");
  }
  DriverLoader& l = GetDriverLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  const bool cache = &d == &l.table;  // fakes are not cached
  if (cache && size_t(device) < l.primaries.size() &&
      l.primaries[size_t(device)] != nullptr) {
    return l.primaries[size_t(device)];
  }
  void* context = nullptr;
  if (int rc = d.primary_ctx_retain(&context, device); rc != 0) {
    return DriverError("cuDevicePrimaryCtxRetain", rc, device);
  }
  if (cache) {
    if (l.primaries.size() <= size_t(device)) l.primaries.resize(size_t(device) + 1);
    l.primaries[size_t(device)] = context;
  }
  return context;
}

}  // namespace internal

ScopedDriverOverride::ScopedDriverOverride(const DriverTable* table) {
  DriverLoader& l = GetDriverLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  previous_ = l.override_table;
  l.override_table = table;
}

ScopedDriverOverride::~ScopedDriverOverride() {
  DriverLoader& l = GetDriverLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  l.override_table = previous_;
}

}  // namespace cutecall
