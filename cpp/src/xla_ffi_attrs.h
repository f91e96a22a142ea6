// Internal to xla_ffi.cc: reading the custom call's attributes. Apart from
// the handlers so that a pure function of XLA's attribute dictionary exists
// for the fuzzer (cpp/fuzz/fuzz_xla_attrs.cc) and the tests.
#ifndef CUTECALL_SRC_XLA_FFI_ATTRS_H_
#define CUTECALL_SRC_XLA_FFI_ATTRS_H_

#include "call_state.h"
#include "cutecall/status.h"
#include "xla/ffi/api/ffi.h"

namespace cutecall::xla_ffi {

// Reads module, key, function, kernel, plan (int64 array) and operands, and
// where present scalars (int64 array) and symbols, from `dict` into `out`,
// which then points into the dictionary's storage. InvalidArgument names a
// missing attribute or one of the wrong type. Checks no value: that is
// CallState::Instantiate's.
Status DecodeAttributes(const ::xla::ffi::Dictionary& dict,
                        CallAttributes* out);

}  // namespace cutecall::xla_ffi

#endif  // CUTECALL_SRC_XLA_FFI_ATTRS_H_
