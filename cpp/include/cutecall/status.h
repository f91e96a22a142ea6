// cutecall/status.h — the error model of the C++ core.
//
// Owns: Status (a code and a message) and ErrorOr<T> (a value or a Status).
// Contract: no function of the core throws across its API; every fallible
// call returns Status or ErrorOr. Codes are chosen deliberately:
//   kInvalidArgument     bad attributes, bad plan, bad operand at run time
//   kFailedPrecondition  missing runtime library, stages called out of order
//   kNotFound            a symbol or file that should exist does not
//   kInternal            the DSL runtime or CUDA reported a failure
#ifndef CUTECALL_STATUS_H_
#define CUTECALL_STATUS_H_

#include <string>
#include <utility>
#include <variant>

namespace cutecall {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,
  kFailedPrecondition = 2,
  kNotFound = 3,
  kInternal = 4,
};

const char* CodeName(Code code);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(Code::kInvalidArgument, std::move(m));
}
inline Status FailedPrecondition(std::string m) {
  return Status(Code::kFailedPrecondition, std::move(m));
}
inline Status NotFound(std::string m) {
  return Status(Code::kNotFound, std::move(m));
}
inline Status Internal(std::string m) {
  return Status(Code::kInternal, std::move(m));
}

template <typename T>
class ErrorOr {
 public:
  ErrorOr(T value) : v_(std::move(value)) {}            // NOLINT: implicit
  ErrorOr(Status status) : v_(std::move(status)) {}     // NOLINT: implicit

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace cutecall

#endif  // CUTECALL_STATUS_H_
