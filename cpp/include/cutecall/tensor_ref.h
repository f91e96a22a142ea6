// cutecall/tensor_ref.h — typed operands for the headers `cutecall export
// --header` writes (one C++ function per bundle entry).
//
// Owns: TensorRef<T, Rank> (a device pointer with Rank extents and optional
// strides), the element types that have no C++ spelling (float16_t,
// bfloat16_t, float8 kinds, Elem<N> for a dtype the header does not know),
// and the lookup a generated function does once per bundle and thread.
// Contract: a TensorRef of another element type or rank does not convert,
// so a generated call with a wrong dtype, rank or arity does not compile.
// TensorRef<T> converts to TensorRef<const T> (inputs take const).
//
//   float* a = ...;  // device memory
//   cutecall::TensorRef<const float, 1> x(a, {n});
#ifndef CUTECALL_TENSOR_REF_H_
#define CUTECALL_TENSOR_REF_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "cutecall/bundle.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*: no CUDA header needed

namespace cutecall {

// Storage-only element types (bytes as the GPU reads them).
struct float16_t { uint16_t bits; };
struct bfloat16_t { uint16_t bits; };
struct float8_e4m3fn_t { uint8_t bits; };
struct float8_e5m2_t { uint8_t bits; };
template <int Bytes>
struct Elem { unsigned char bytes[Bytes]; };  // a dtype the header did not name

template <typename T, int Rank>
struct TensorRef {
  static_assert(Rank >= 0 && Rank <= 8, "rank 0..8");
  T* data = nullptr;
  int64_t dims[Rank > 0 ? Rank : 1] = {};
  const int64_t* strides = nullptr;  // elements; nullptr: compact

  TensorRef() = default;
  // dims must list Rank extents (checked when the call runs).
  TensorRef(T* d, std::initializer_list<int64_t> extents,
            const int64_t* s = nullptr)
      : data(d), strides(s) {
    size_t i = 0;
    for (int64_t e : extents) {
      if (i < size_t(Rank)) dims[i] = e;
      ++i;
    }
    given = i;
  }
  TensorRef(T* d, const int64_t* extents, const int64_t* s = nullptr)
      : data(d), strides(s), given(size_t(Rank)) {
    for (int i = 0; i < Rank; ++i) dims[i] = extents[i];
  }
  // TensorRef<float, R> -> TensorRef<const float, R>.
  template <typename U, typename = std::enable_if_t<
                            std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  TensorRef(const TensorRef<U, Rank>& o)  // NOLINT: implicit by design
      : data(o.data), strides(o.strides), given(o.given) {
    for (int i = 0; i < Rank; ++i) dims[i] = o.dims[i];
  }

  BufferView view() const {
    return BufferView{const_cast<void*>(static_cast<const void*>(data)), dims,
                      int64_t(given == size_t(Rank) ? Rank : int64_t(given)),
                      strides};
  }
  size_t given = size_t(Rank);  // extents given (a mismatch fails the run)
};

namespace typed_internal {

// What a generated function expects of its entry: per operand (inputs,
// then outputs) the rank and element size; the scalar count.
struct Expect {
  const char* header;
  const char* name;
  const int32_t* ranks;
  const int32_t* elem_bytes;
  size_t num_inputs, num_outputs, num_scalars;
};

// The entry of `bundle` a generated function calls, checked against what
// its header was generated for (a bundle exported again with other
// signatures is an error naming the header).
ErrorOr<const BundleKernel*> Lookup(const Bundle& bundle, const Expect& e);

// One generated function's per-thread memo: the last bundle and its entry.
struct Cache {
  uint64_t bundle_id = 0;  // Bundle ids start at 1
  const BundleKernel* kernel = nullptr;
};

inline Status Run(const Bundle& bundle, const Expect& e, Cache& cache,
                  CUstream_st* stream, Span<BufferView> inputs,
                  Span<BufferView> outputs, Span<abi::Slot> scalars) {
  if (cache.bundle_id != bundle.id()) {
    ErrorOr<const BundleKernel*> k = Lookup(bundle, e);
    if (!k.ok()) return k.status();
    cache.kernel = k.value();
    cache.bundle_id = bundle.id();
  }
  return cache.kernel->Run(stream, inputs, outputs, scalars);
}

template <typename T>
abi::Slot Scalar(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return ScalarF32(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return ScalarF64(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return ScalarBool(v);
  } else if constexpr (std::is_signed_v<T>) {
    return ScalarI64(int64_t(v));  // sign-extended
  } else {
    return ScalarI64(int64_t(uint64_t(v)));  // zero-extended
  }
}

}  // namespace typed_internal
}  // namespace cutecall

#endif  // CUTECALL_TENSOR_REF_H_
