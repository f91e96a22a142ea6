// Builds the attribute dictionary XLA hands a custom call's instantiate
// stage (XLA_FFI_Attrs: parallel arrays of types, names and values, names
// sorted), for the attribute tests (xla_attrs_test.cc) and the fuzzer
// (cpp/fuzz/fuzz_xla_attrs.cc). Values are owned here; the built
// dictionary is valid until this builder changes or dies.
#ifndef CUTECALL_TESTS_FFI_ATTRS_H_
#define CUTECALL_TESTS_FFI_ATTRS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "xla/ffi/api/c_api.h"

namespace cutecall_test {

class FfiAttrs {
 public:
  // Each setter replaces an attribute of the same name.
  void String(const std::string& name, std::string value) {
    Attr& a = Fresh(name, XLA_FFI_AttrType_STRING);
    a.bytes = std::move(value);
  }
  void I64Array(const std::string& name, std::vector<int64_t> values) {
    Attr& a = Fresh(name, XLA_FFI_AttrType_ARRAY);
    a.i64 = std::move(values);
    a.dtype = XLA_FFI_DataType_S64;
  }
  void I32Array(const std::string& name, std::vector<int32_t> values) {
    Attr& a = Fresh(name, XLA_FFI_AttrType_ARRAY);
    a.i32 = std::move(values);
    a.dtype = XLA_FFI_DataType_S32;
  }
  void I64Scalar(const std::string& name, int64_t value) {
    Attr& a = Fresh(name, XLA_FFI_AttrType_SCALAR);
    a.i64 = {value};
    a.dtype = XLA_FFI_DataType_S64;
  }
  void EmptyDictionary(const std::string& name) {
    Fresh(name, XLA_FFI_AttrType_DICTIONARY);
  }
  void Erase(const std::string& name) { attrs_.erase(name); }

  // The dictionary as XLA passes it (null backing arrays when empty).
  const XLA_FFI_Attrs* Build() {
    types_.clear();
    names_.clear();
    values_.clear();
    for (auto& [name, a] : attrs_) {
      a.name_span = {name.data(), name.size()};
      types_.push_back(a.type);
      names_.push_back(&a.name_span);
      switch (a.type) {
        case XLA_FFI_AttrType_STRING:
          a.span = {a.bytes.data(), a.bytes.size()};
          values_.push_back(&a.span);
          break;
        case XLA_FFI_AttrType_ARRAY:
          a.array.dtype = a.dtype;
          a.array.size = a.dtype == XLA_FFI_DataType_S64 ? a.i64.size()
                                                         : a.i32.size();
          a.array.data = a.dtype == XLA_FFI_DataType_S64
                             ? static_cast<void*>(a.i64.data())
                             : static_cast<void*>(a.i32.data());
          values_.push_back(&a.array);
          break;
        case XLA_FFI_AttrType_SCALAR:
          a.scalar = {a.dtype, a.i64.data()};
          values_.push_back(&a.scalar);
          break;
        default:  // an empty nested dictionary
          a.nested = Empty();
          values_.push_back(&a.nested);
          break;
      }
    }
    dict_ = Empty();
    dict_.size = int64_t(attrs_.size());
    if (!attrs_.empty()) {
      dict_.types = types_.data();
      dict_.names = names_.data();
      dict_.attrs = values_.data();
    }
    return &dict_;
  }

 private:
  struct Attr {
    XLA_FFI_AttrType type = XLA_FFI_AttrType_STRING;
    XLA_FFI_DataType dtype = XLA_FFI_DataType_S64;
    std::string bytes;
    std::vector<int64_t> i64;
    std::vector<int32_t> i32;
    XLA_FFI_ByteSpan name_span{};
    XLA_FFI_ByteSpan span{};
    XLA_FFI_Array array{};
    XLA_FFI_Scalar scalar{};
    XLA_FFI_Attrs nested{};
  };

  static XLA_FFI_Attrs Empty() {
    XLA_FFI_Attrs d{};
    d.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
    return d;
  }
  Attr& Fresh(const std::string& name, XLA_FFI_AttrType type) {
    Attr& a = attrs_[name] = Attr();
    a.type = type;
    return a;
  }

  std::map<std::string, Attr> attrs_;  // sorted by name, as XLA sorts them
  std::vector<XLA_FFI_AttrType> types_;
  std::vector<XLA_FFI_ByteSpan*> names_;
  std::vector<void*> values_;
  XLA_FFI_Attrs dict_{};
};

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_FFI_ATTRS_H_
