/* cutecall/cutecall_c.h — the C ABI of cutecall bundles: run precompiled
 * CuTe DSL kernels from C, Rust, Go, Julia... with no Python and no C++.
 *
 * Owns: opaque handles over cutecall/bundle.h (open, find, run, close),
 * status codes with a name and a message each, and the last error's full
 * text per thread. Contract: every function is extern "C", throws nothing,
 * and takes or returns only C types; a failed call returns a status other
 * than CUTECALL_OK and leaves its detail in cutecall_last_error() (the
 * calling thread's, valid until its next failing call). Handles are safe to
 * share between threads once opened; cutecall_kernel_run may be called from
 * many threads at once. docs/bundles.md ("The C ABI") lists the codes.
 *
 * What must not change (the ABI): functions are only added; status codes
 * and CUTECALL_LOAD_* values are only appended; cutecall_tensor and
 * cutecall_scalar never change; a struct passed in that begins with
 * `size_t struct_size` (cutecall_open_options) only grows, by fields
 * appended at its end whose zero value means what cutecall did before the
 * field existed (see "Extensible structs" below).
 *
 *   cutecall_open_options options;
 *   memset(&options, 0, sizeof options);
 *   options.struct_size = CUTECALL_OPEN_OPTIONS_STRUCT_SIZE;
 *   options.load_modules = CUTECALL_LOAD_LAZY;
 *   options.device_arch = "sm_90a";
 *   cutecall_bundle* b = NULL;
 *   if (cutecall_bundle_open("kernels.bundle", &options, &b) != CUTECALL_OK) {
 *     fprintf(stderr, "%s\n", cutecall_last_error());
 *   }
 *   const cutecall_kernel* k = NULL;
 *   cutecall_bundle_find(b, "vector_add", &k);
 *   int64_t n[1] = {1024};
 *   cutecall_tensor in[2] = {{a, n, 1, NULL}, {b_dev, n, 1, NULL}};
 *   cutecall_tensor out[1] = {{c, n, 1, NULL}};
 *   cutecall_kernel_run(k, stream, in, 2, out, 1, NULL, 0);
 *   cutecall_bundle_close(b);
 */
#ifndef CUTECALL_CUTECALL_C_H_
#define CUTECALL_CUTECALL_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Append only: values are ABI. */
typedef enum cutecall_status {
  CUTECALL_OK = 0,
  /* A bad argument: null handle or pointer, wrong operand count, a shape,
   * dtype size, alignment or tied dim the kernel was not compiled for, a
   * corrupt or tampered bundle. */
  CUTECALL_ERROR_INVALID_ARGUMENT = 1,
  /* The environment is not ready: no matching CuTe DSL runtime, an arch the
   * GPU cannot run, a bundle opened without loading its modules. */
  CUTECALL_ERROR_FAILED_PRECONDITION = 2,
  /* No such bundle directory, object file or kernel name. */
  CUTECALL_ERROR_NOT_FOUND = 3,
  /* The CuTe DSL runtime or CUDA failed (the launch, a module load). */
  CUTECALL_ERROR_INTERNAL = 4
} cutecall_status;

typedef struct cutecall_bundle cutecall_bundle; /* an open bundle */
typedef struct cutecall_kernel cutecall_kernel; /* owned by its bundle */

/* One tensor: device pointer, `rank` extents, strides in elements (NULL:
 * compact in the layout the kernel was compiled for). Layout-compatible
 * with cutecall::BufferView. */
typedef struct cutecall_tensor {
  void* data;
  const int64_t* dims;
  int64_t rank;
  const int64_t* strides;
} cutecall_tensor;

/* One runtime scalar: 8 bytes as the kernel reads them; build with
 * cutecall_scalar_f32() etc. */
typedef struct cutecall_scalar {
  uint64_t bits;
} cutecall_scalar;

/* cutecall_open_options.load_modules: when modules load. */
enum {
  CUTECALL_LOAD_NONE = 0,  /* verify and list only (no GPU needed) */
  CUTECALL_LOAD_LAZY = 1,  /* each kernel's module at its first run (default) */
  CUTECALL_LOAD_EAGER = 2  /* every module in cutecall_bundle_open */
};

/* Extensible structs, as XLA's FFI versions its (XLA_FFI_*_STRUCT_SIZE):
 * the caller sets `struct_size` to the size its header gives
 * (CUTECALL_<NAME>_STRUCT_SIZE, the end of its last field) and zeroes the
 * rest (memset, or `= {0}`), and cutecall reads only what that size holds.
 *   - smaller than this header's (a caller built against an older header):
 *     accepted; the fields it lacks take their defaults;
 *   - smaller than the first version's (..._STRUCT_SIZE_V1), or 0:
 *     CUTECALL_ERROR_INVALID_ARGUMENT naming field 'struct_size';
 *   - larger (a newer header): accepted if every byte beyond the fields
 *     this cutecall knows is zero (options left at their defaults), else
 *     CUTECALL_ERROR_INVALID_ARGUMENT naming 'struct_size' and the offset. */
#define CUTECALL_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

typedef struct cutecall_open_options {
  size_t struct_size;          /* CUTECALL_OPEN_OPTIONS_STRUCT_SIZE */
  /* Version 1. */
  const char* expected_digest; /* manifest-sha256 pin, or NULL */
  const char* device_arch;     /* e.g. "sm_90"; NULL: not checked */
  int load_modules;            /* CUTECALL_LOAD_*; other non-zero: lazy */
  /* Version 2. Non-zero: check every entry against CUDA device `device`,
   * read from the driver: its arch (unless device_arch is set) and what
   * each kernel read of its device while traced (SM count, shared memory,
   * L2). Needs libcuda.so.1. 0: no device check. */
  int check_device;
  int device;                  /* a CUDA device ordinal */
} cutecall_open_options;

#define CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1 \
  CUTECALL_STRUCT_SIZE(cutecall_open_options, load_modules)
#define CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V2 \
  CUTECALL_STRUCT_SIZE(cutecall_open_options, device)
/* This header's version: what a caller sets. */
#define CUTECALL_OPEN_OPTIONS_STRUCT_SIZE CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V2

/* Names and messages of status codes: "CUTECALL_ERROR_NOT_FOUND" and one
 * sentence; "CUTECALL_UNKNOWN_STATUS" for values not listed above. */
const char* cutecall_status_name(cutecall_status status);
const char* cutecall_status_message(cutecall_status status);
/* The full text of this thread's last failure ("" if none): names the
 * bundle, the kernel, the operand and the value, as in C++ and Python. */
const char* cutecall_last_error(void);

/* Opens and verifies the bundle at directory `path`; modules load at each
 * kernel's first run (options->load_modules: CUTECALL_LOAD_EAGER loads all
 * here, CUTECALL_LOAD_NONE none; $CUTECALL_BUNDLE_EAGER=1 makes lazy
 * eager). `options` may be NULL (defaults: no pin, no arch or device
 * check, lazy); else its struct_size is checked first (see "Extensible
 * structs"). On success *out is a handle for cutecall_bundle_close. */
cutecall_status cutecall_bundle_open(const char* path,
                                     const cutecall_open_options* options,
                                     cutecall_bundle** out);
void cutecall_bundle_close(cutecall_bundle* bundle); /* NULL: no-op */

/* The bundle's manifest-sha256 and its kernels, sorted by name. The strings
 * live as long as the bundle. */
const char* cutecall_bundle_digest(const cutecall_bundle* bundle);
size_t cutecall_bundle_num_kernels(const cutecall_bundle* bundle);
const cutecall_kernel* cutecall_bundle_kernel(const cutecall_bundle* bundle,
                                              size_t i);
cutecall_status cutecall_bundle_find(const cutecall_bundle* bundle,
                                     const char* name,
                                     const cutecall_kernel** out);

const char* cutecall_kernel_name(const cutecall_kernel* kernel);
const char* cutecall_kernel_arch(const cutecall_kernel* kernel);
size_t cutecall_kernel_num_inputs(const cutecall_kernel* kernel);
size_t cutecall_kernel_num_outputs(const cutecall_kernel* kernel);
size_t cutecall_kernel_num_scalars(const cutecall_kernel* kernel);
/* Operand i of inputs then outputs: its rank and element size in bytes;
 * -1 when i is out of range. */
int64_t cutecall_kernel_operand_rank(const cutecall_kernel* kernel, size_t i);
int64_t cutecall_kernel_operand_elem_bytes(const cutecall_kernel* kernel,
                                           size_t i);
/* Scalar i's type ("Float32", ...; "?" unknown) and name ("" unknown). */
const char* cutecall_kernel_scalar_type(const cutecall_kernel* kernel, size_t i);
const char* cutecall_kernel_scalar_name(const cutecall_kernel* kernel, size_t i);

/* Loads the kernel's module now, if not loaded yet (what its first run
 * does: reads the object, checks its digest, loads it once). */
cutecall_status cutecall_kernel_load(const cutecall_kernel* kernel);

/* Launches on `stream` (a cudaStream_t; NULL: the default stream). Never
 * synchronizes; once the kernel's module is loaded (its first run loads
 * it), allocates nothing. */
cutecall_status cutecall_kernel_run(const cutecall_kernel* kernel, void* stream,
                                    const cutecall_tensor* inputs,
                                    size_t num_inputs,
                                    const cutecall_tensor* outputs,
                                    size_t num_outputs,
                                    const cutecall_scalar* scalars,
                                    size_t num_scalars);

cutecall_scalar cutecall_scalar_f32(float v);
cutecall_scalar cutecall_scalar_f64(double v);
cutecall_scalar cutecall_scalar_i32(int32_t v);
cutecall_scalar cutecall_scalar_i64(int64_t v);
cutecall_scalar cutecall_scalar_bool(int v);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUTECALL_CUTECALL_C_H_ */
