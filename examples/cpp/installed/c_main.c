/* c_main — a C program (C99, built with cc) running a bundle through the C
 * ABI, cutecall/cutecall_c.h, against the installed package.
 *
 *   c_main BUNDLE --list   open without loading (no GPU), list the entries,
 *                          check error codes and messages
 *   c_main BUNDLE          (built with CUDA) run vector_add and check it
 * PASS: exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cutecall/cutecall_c.h"

#ifdef CUTECALL_EXAMPLE_GPU
#include <cuda_runtime.h>
#endif

static int fail(const char* what, cutecall_status s) {
  fprintf(stderr, "FAIL: %s: %s (%s): %s\n", what, cutecall_status_name(s),
          cutecall_status_message(s), cutecall_last_error());
  return 1;
}

static void list(const cutecall_bundle* b) {
  size_t i, j;
  printf("bundle: %zu entries, manifest-sha256 %s\n",
         cutecall_bundle_num_kernels(b), cutecall_bundle_digest(b));
  for (i = 0; i < cutecall_bundle_num_kernels(b); ++i) {
    const cutecall_kernel* k = cutecall_bundle_kernel(b, i);
    size_t ops = cutecall_kernel_num_inputs(k) + cutecall_kernel_num_outputs(k);
    printf("  entry %s: %s, %zu inputs, %zu outputs, %zu scalars;",
           cutecall_kernel_name(k), cutecall_kernel_arch(k),
           cutecall_kernel_num_inputs(k), cutecall_kernel_num_outputs(k),
           cutecall_kernel_num_scalars(k));
    for (j = 0; j < ops; ++j) {
      printf(" op%zu rank %lld x %lld B", j,
             (long long)cutecall_kernel_operand_rank(k, j),
             (long long)cutecall_kernel_operand_elem_bytes(k, j));
    }
    printf("\n");
  }
}

/* Error codes travel with a message; nothing is launched here. */
static int check_errors(const cutecall_bundle* b) {
  const cutecall_kernel* k = NULL;
  int64_t n[1] = {1000}, m[1] = {999};
  void* p = (void*)((size_t)1 << 20);
  cutecall_tensor in[2], out[1];
  cutecall_status s = cutecall_bundle_find(b, "no_such_kernel", &k);
  printf("find no_such_kernel: %s: %s\n", cutecall_status_name(s), cutecall_last_error());
  if (s != CUTECALL_ERROR_NOT_FOUND || k != NULL) return fail("find", s);
  if ((s = cutecall_bundle_find(b, "vector_add", &k)) != CUTECALL_OK) return fail("find", s);
  in[0].data = p; in[0].dims = n; in[0].rank = 1; in[0].strides = NULL;
  in[1] = in[0];
  in[1].dims = m;
  out[0] = in[0];
  s = cutecall_kernel_run(k, NULL, in, 2, out, 1, NULL, 0);
  printf("tie check: %s: %s\n", cutecall_status_name(s), cutecall_last_error());
  if (s != CUTECALL_ERROR_INVALID_ARGUMENT || !strstr(cutecall_last_error(), "tied dim 'n'")) {
    return fail("tie", s);
  }
  s = cutecall_kernel_run(k, NULL, in, 1, out, 1, NULL, 0);
  printf("arity check: %s: %s\n", cutecall_status_name(s), cutecall_last_error());
  if (s != CUTECALL_ERROR_INVALID_ARGUMENT) return fail("arity", s);
  return 0;
}

#ifdef CUTECALL_EXAMPLE_GPU
static int run_on_gpu(const cutecall_bundle* b) {
  const int64_t n = 1000003;
  int64_t dims[1];
  size_t bytes = (size_t)n * sizeof(float), i;
  float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  float *a, *bb, *c;
  cudaStream_t stream;
  const cutecall_kernel* k = NULL;
  cutecall_tensor in[2], out[1];
  cutecall_status s;
  dims[0] = n;
  for (i = 0; i < (size_t)n; ++i) {
    ha[i] = 0.5f * (float)(i % 1000);
    hb[i] = 1.0f - (float)(i % 7);
  }
  if (cudaMalloc((void**)&a, bytes) || cudaMalloc((void**)&bb, bytes) ||
      cudaMalloc((void**)&c, bytes) || cudaStreamCreate(&stream)) {
    fprintf(stderr, "FAIL: CUDA allocation\n");
    return 1;
  }
  cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(bb, hb, bytes, cudaMemcpyHostToDevice);
  if ((s = cutecall_bundle_find(b, "vector_add", &k)) != CUTECALL_OK) return fail("find", s);
  in[0].data = a; in[0].dims = dims; in[0].rank = 1; in[0].strides = NULL;
  in[1] = in[0];
  in[1].data = bb;
  out[0] = in[0];
  out[0].data = c;
  if ((s = cutecall_kernel_run(k, stream, in, 2, out, 1, NULL, 0)) != CUTECALL_OK) {
    return fail("run", s);
  }
  cudaStreamSynchronize(stream);
  cudaMemcpy(hc, c, bytes, cudaMemcpyDeviceToHost);
  for (i = 0; i < (size_t)n; ++i) {
    if (hc[i] != ha[i] + hb[i]) {
      fprintf(stderr, "FAIL: c[%zu] = %g, expected %g\n", i, hc[i], ha[i] + hb[i]);
      return 1;
    }
  }
  printf("vector_add: %lld elements match a + b\n", (long long)n);
  cudaFree(a);
  cudaFree(bb);
  cudaFree(c);
  cudaStreamDestroy(stream);
  free(ha);
  free(hb);
  free(hc);
  return 0;
}
#endif

int main(int argc, char** argv) {
  cutecall_open_options options;
  cutecall_bundle* b = NULL;
  cutecall_status s;
  int rc = 0, list_only;
  if (argc < 2) {
    fprintf(stderr, "usage: c_main BUNDLE_DIR [--list]\n");
    return 2;
  }
  list_only = argc > 2 && strcmp(argv[2], "--list") == 0;
  /* Zeroed, then sized: fields this program does not set keep their
   * defaults, in this cutecall and any later one (cutecall_c.h). */
  memset(&options, 0, sizeof options);
  options.struct_size = CUTECALL_OPEN_OPTIONS_STRUCT_SIZE;
  options.load_modules = list_only ? CUTECALL_LOAD_NONE : CUTECALL_LOAD_LAZY;
  options.check_device = !list_only; /* GPU 0's arch, SM count... */
  options.device = 0;
  if ((s = cutecall_bundle_open(argv[1], &options, &b)) != CUTECALL_OK) {
    return fail("open", s);
  }
  list(b);
  rc = check_errors(b);
#ifdef CUTECALL_EXAMPLE_GPU
  if (rc == 0 && !list_only) rc = run_on_gpu(b);
#else
  if (rc == 0 && !list_only) {
    fprintf(stderr, "FAIL: built without CUDA: only --list\n");
    rc = 1;
  }
#endif
  cutecall_bundle_close(b);
  if (rc == 0) printf("PASS\n");
  return rc;
}
