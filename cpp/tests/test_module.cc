// Stands in for a compiled CuTe DSL object in the module registry tests.
// Compiled (never linked) into an ELF64 relocatable object whose bytes the
// tests read back. It defines the symbols of two function prefixes,
// `cc_test` and `cc_other`, and references two undefined symbols: one of
// its own and, as every CuTe DSL module does, _cudaLaunchKernelEx.
extern "C" {

extern const char cc_test_version[] = "1.1";
extern const char cc_other_version[] = "1.1";

// Undefined here: appears in the symbol table with section index 0.
int cc_test_missing(int x);

int cc_test_foo(int x) { return cc_test_missing(x) + 1; }

// The launch call of a compiled module (cudaLaunchKernelExC's signature).
int _cudaLaunchKernelEx(const void* config, const void* kernel, void** args);

int cc_test_launch(const void* config) {
  return _cudaLaunchKernelEx(config, nullptr, nullptr);
}

}  // extern "C"
