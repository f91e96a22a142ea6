// wrong_call.cc — compiles only as a right call: each WRONG_<kind> macro
// makes one argument of a generated function wrong, which must be a
// compile error (examples/cpp/installed/CMakeLists.txt's wrong_call_*).
#include "kernels.h"

cutecall::Status Call(const cutecall::Bundle& bundle, float* a, float* b,
                      float* c, int* ints, int64_t n, cudaStream_t stream) {
  (void)ints;
  cutecall::TensorRef<float, 1> x(a, {n}), y(b, {n}), z(c, {n});
#if defined(WRONG_dtype)
  cutecall::TensorRef<int, 1> wrong(ints, {n});
  return kernels::vector_add(bundle, x, wrong, z, stream);
#elif defined(WRONG_rank)
  cutecall::TensorRef<float, 2> wrong(b, {n, 1});
  return kernels::vector_add(bundle, x, wrong, z, stream);
#elif defined(WRONG_arity)
  return kernels::vector_add(bundle, x, z, stream);
#else
  return kernels::vector_add(bundle, x, y, z, stream);
#endif
}
