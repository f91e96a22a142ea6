// dlpack_exchange.h — the DLPack C exchange API, as cutecall consumes it.
//
// Owns: the C layout of DLTensor and of the `__dlpack_c_exchange_api__`
// table (DLPack >= 1.2; PyTorch >= 2.10 publishes it on torch.Tensor as a
// PyCapsule named "dlpack_exchange_api"). Declared here from the DLPack
// specification so that cutecall needs neither DLPack's nor PyTorch's
// headers; every offset is pinned below. Must match DLPack major version 1.
#ifndef CUTECALL_PYTHON_DLPACK_EXCHANGE_H_
#define CUTECALL_PYTHON_DLPACK_EXCHANGE_H_

#include <cstddef>
#include <cstdint>

namespace cutecall::dlpack {

inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr char kCapsuleName[] = "dlpack_exchange_api";
inline constexpr char kAttribute[] = "__dlpack_c_exchange_api__";

struct Version {
  uint32_t major;
  uint32_t minor;
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements; may be null (compact row-major)
  uint64_t byte_offset;
};

struct ExchangeApiHeader {
  Version version;
  ExchangeApiHeader* prev_api;
};

// Functions return 0 on success, -1 with a Python exception set.
struct ExchangeApi {
  ExchangeApiHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, Tensor* out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id,
                             void** out_stream);
};

static_assert(sizeof(Device) == 8 && sizeof(DataType) == 4);
static_assert(offsetof(Tensor, device) == 8 && offsetof(Tensor, ndim) == 16 &&
              offsetof(Tensor, dtype) == 20 && offsetof(Tensor, shape) == 24 &&
              offsetof(Tensor, strides) == 32 &&
              offsetof(Tensor, byte_offset) == 40 && sizeof(Tensor) == 48);
static_assert(sizeof(ExchangeApiHeader) == 16);
static_assert(offsetof(ExchangeApi, dltensor_from_py_object_no_sync) == 40 &&
              offsetof(ExchangeApi, current_work_stream) == 48);

}  // namespace cutecall::dlpack

#endif  // CUTECALL_PYTHON_DLPACK_EXCHANGE_H_
