// A stand-in for libcute_dsl_runtime.so that exports the six CuteDSLRT_*
// entry points and _cudaLaunchKernelEx, for the runtime loading tests
// (runtime_load_test.cc). Built a second time with
// CUTECALL_FAKE_RUNTIME_WITHOUT_LAUNCH, it lacks _cudaLaunchKernelEx
// (runtime_load_without_launch_test.cc). Behaviour is fixed and
// recognisable, so a test can tell which exported function a RuntimeTable
// entry resolved to.
#include <cstddef>
#include <cstring>

namespace {
int g_module_token = 0;
int g_function_token = 0;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int CuteDSLRT_Module_Create_From_Bytes(
    void** module, const unsigned char* bytes, size_t size,
    const char** /*shared_libs*/, size_t /*num_shared_libs*/) {
  if (bytes == nullptr || size == 0) return 1;
  *module = &g_module_token;
  return 0;
}

__attribute__((visibility("default"))) int CuteDSLRT_Module_Get_Function(
    void** function, void* module, const char* prefix) {
  if (module != &g_module_token || std::strcmp(prefix, "cc_test") != 0) {
    return 2;
  }
  *function = &g_function_token;
  return 0;
}

// Fails with 3 for an unknown function and 4 for a packed array too short to
// hold the stream and the CUDA status; leaves the CUDA status untouched.
__attribute__((visibility("default"))) int CuteDSLRT_Function_Run(
    void* function, void** /*args*/, size_t num_args) {
  if (function != &g_function_token) return 3;
  if (num_args < 2) return 4;
  return 0;
}

__attribute__((visibility("default"))) int CuteDSLRT_Module_Destroy(
    void* module) {
  return module == &g_module_token ? 0 : 5;
}

__attribute__((visibility("default"))) const char* CuteDSLRT_GetErrorName(
    int error) {
  return error == 0 ? "CuteDSLRT_Success" : "CuteDSLRT_Error_FakeLibrary";
}

__attribute__((visibility("default"))) const char* CuteDSLRT_GetErrorString(
    int /*error*/) {
  return "fake library description";
}

#ifndef CUTECALL_FAKE_RUNTIME_WITHOUT_LAUNCH
// cudaLaunchKernelExC's signature; config's first word is gridDim.x.
// Returns 1 (cudaErrorInvalidValue) for a null config, else 1000 + gridDim.x.
__attribute__((visibility("default"))) int _cudaLaunchKernelEx(
    const void* config, const void* /*kernel*/, void** /*args*/) {
  if (config == nullptr) return 1;
  unsigned grid_x = 0;
  std::memcpy(&grid_x, config, sizeof(grid_x));
  return 1000 + int(grid_x);
}
#endif

}  // extern "C"
