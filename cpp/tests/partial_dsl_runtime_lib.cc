// A shared library that exports only three of the six CuteDSLRT_* entry
// points: loading it as the runtime must fail and name the other three.
#include <cstddef>

extern "C" {

__attribute__((visibility("default"))) int CuteDSLRT_Module_Create_From_Bytes(
    void**, const unsigned char*, size_t, const char**, size_t) {
  return 1;
}

__attribute__((visibility("default"))) int CuteDSLRT_Module_Destroy(void*) {
  return 0;
}

__attribute__((visibility("default"))) const char* CuteDSLRT_GetErrorName(
    int) {
  return "CuteDSLRT_Error_Partial";
}

}  // extern "C"
