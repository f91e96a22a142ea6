// Fuzz target: the XLA FFI instantiate stage's reading of attributes,
// xla_ffi::DecodeAttributes (cpp/src/xla_ffi.cc, over XLA's attribute
// dictionary) and CallState::Instantiate (cpp/src/call_state.cc: the key,
// the plan, the names, the scalars). Instantiate's last step, Prepare,
// loads the module through the DSL runtime and is not run here.
//
// Input (cpp/fuzz/corpus/xla_attrs, written by make_corpus.cc):
//   uint8 flags: bit 0 sets 'key' to the SHA-256 of 'module' (when both are
//                strings), so that mutations get past the digest check
//   then records until the input ends:
//     uint8 kind      0 string, 1 int64 array, 2 int32 array,
//                     3 int64 scalar, 4 empty dictionary (mod 5)
//     uint8 length, name bytes
//     uint16 length (little-endian), value bytes (arrays: little-endian
//                     elements; a scalar: 8 bytes)
// A name given twice keeps its last value; the dictionary is sorted by
// name, as XLA sorts it.
// Beyond ASan/UBSan, checks that decoded views point into the dictionary
// and that an instantiated call site agrees with its attributes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "call_state.h"
#include "sha256.h"
#include "ffi_attrs.h"
#include "xla_ffi_attrs.h"

namespace {

using cutecall_test::FfiAttrs;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "attribute contract broken: %s\n", what);
    std::abort();
  }
}

template <typename T>
std::vector<T> Elements(std::string_view bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Reads the records of `in` into `attrs`. `module` gets the value of
// 'module' when it is a string, `has_key` whether 'key' is a string.
void ReadRecords(std::string_view in, FfiAttrs* attrs, std::string* module,
                 bool* has_key) {
  while (in.size() >= 2) {
    const int kind = uint8_t(in[0]) % 5;
    const size_t name_len = uint8_t(in[1]);
    in.remove_prefix(2);
    if (in.size() < name_len + 2) return;
    std::string name(in.substr(0, name_len));
    in.remove_prefix(name_len);
    size_t len = uint8_t(in[0]) | size_t(uint8_t(in[1])) << 8;
    in.remove_prefix(2);
    if (in.size() < len) return;
    std::string_view value = in.substr(0, len);
    in.remove_prefix(len);
    if (name == "module") module->clear();
    if (name == "key") *has_key = false;
    switch (kind) {
      case 0:
        attrs->String(name, std::string(value));
        if (name == "module") *module = std::string(value);
        if (name == "key") *has_key = true;
        break;
      case 1: attrs->I64Array(name, Elements<int64_t>(value)); break;
      case 2: attrs->I32Array(name, Elements<int32_t>(value)); break;
      case 3: {
        int64_t v = 0;
        std::memcpy(&v, value.data(), std::min(value.size(), sizeof(v)));
        attrs->I64Scalar(name, v);
        break;
      }
      default: attrs->EmptyDictionary(name); break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const bool fix_key = (in[0] & 1) != 0;
  in.remove_prefix(1);
  FfiAttrs attrs;
  std::string module;
  bool has_key = false;
  ReadRecords(in, &attrs, &module, &has_key);
  if (fix_key && has_key) {
    attrs.String("key", cutecall::ToHex(cutecall::Sha256(module)));
  }
  const XLA_FFI_Attrs* dict = attrs.Build();

  cutecall::CallAttributes call;
  cutecall::Status s =
      cutecall::xla_ffi::DecodeAttributes(::xla::ffi::Dictionary(dict), &call);
  if (!s.ok()) {
    Check(s.code() == cutecall::Code::kInvalidArgument, "decode error code");
    return 0;
  }
  Check(call.plan_size == 0 || call.plan != nullptr, "plan view");
  Check(call.num_scalars == 0 || call.scalars != nullptr, "scalars view");
  Check(call.module == module, "module view");

  cutecall::ErrorOr<std::unique_ptr<cutecall::CallState>> state =
      cutecall::CallState::Instantiate(call);
  if (!state.ok()) {
    Check(state.status().code() == cutecall::Code::kInvalidArgument,
          "instantiate error code");
    Check(!state.status().message().empty(), "error without a message");
    return 0;
  }
  const cutecall::LaunchPlan& plan = state.value()->plan();
  Check(!call.module.empty(), "instantiated an empty module");
  Check(plan.num_scalars() == call.num_scalars, "scalar count");
  Check(plan.num_slots() <= cutecall::abi::kMaxSlots, "slot count");
  Check(!state.value()->prepared(), "instantiate loaded the module");
  return 0;
}
