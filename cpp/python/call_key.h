// call_key.h — what one specialization of a torch launch object matches:
// the signature words of the call it was compiled for, and the exact
// extents and strides its kernel compiled in (its static masks).
//
// Owns: CallWords (one call as the launcher read it: signature words per
// container and leaf, and each tensor leaf's DLPack view) and CallKey (an
// entry's key, built once from the call that missed and the static masks
// its KernelEntry carries). Plain C++ -- no Python -- so GoogleTests cover
// it (cpp/tests/call_key_test.cc).
// Contract: a call's words never depend on any mask (AppendTensorSignature
// with mask 0): describing a call once serves every entry. Matches compares
// the words, then, per masked tensor leaf, the compiled-in values
// (AppendStaticValues); it allocates nothing.
#ifndef CUTECALL_PYTHON_CALL_KEY_H_
#define CUTECALL_PYTHON_CALL_KEY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cutecall/status.h"
#include "dlpack_exchange.h"
#include "tensor_signature.h"

namespace cutecall::py {

inline constexpr size_t kMaxArgs = 64;  // leaves of one call's arguments
// A call's pytree arguments: nesting, containers, and the signature's words
// (every leaf's, two per container, one per dict key).
inline constexpr int kMaxDepth = 8;
inline constexpr size_t kMaxContainers = 64;
inline constexpr size_t kMaxSignatureWords = kMaxArgs * kMaxArgWords + 4 * kMaxContainers;

// One call's signature: the words of its arguments' containers and leaves,
// in order; per leaf, words starting at arg_at[i], the low byte of the
// first being its tag (tensor_signature.h); per tensor leaf, its view.
struct CallWords {
  size_t n = 0;  // leaves (an argument that is not a container is one)
  int64_t signature[kMaxSignatureWords];
  size_t sig_len = 0;
  size_t arg_at[kMaxArgs];         // where each leaf's words start
  dlpack::Tensor tensors[kMaxArgs];  // tensor leaves only

  int64_t tag(size_t i) const { return signature[arg_at[i]] & 0xff; }
};

class CallKey {
 public:
  // The key of calls like `call` whose tensor leaves also have the values
  // `masks` names (one StaticMask per leaf; fewer: the rest are 0; bits past
  // a tensor's rank are ignored). InvalidArgument for more masks than leaves
  // or a mask on a leaf that is not a tensor.
  static ErrorOr<CallKey> Make(const CallWords& call, const StaticMask* masks,
                               size_t num_masks);

  // Whether `call` has this key's words and compiled-in values. Inline: the
  // per-call path.
  bool Matches(const CallWords& call) const {
    if (words_.size() != call.sig_len ||
        std::memcmp(words_.data(), call.signature,
                    call.sig_len * sizeof(int64_t)) != 0) {
      return false;
    }
    return checks_.empty() || MatchesStatic(call);
  }

  bool has_static() const { return !checks_.empty(); }

 private:
  // The compiled-in values of `call`'s masked leaves equal this key's.
  bool MatchesStatic(const CallWords& call) const;

  struct Check {
    uint32_t leaf;
    StaticMask mask;
  };
  std::vector<int64_t> words_;
  std::vector<Check> checks_;   // masked tensor leaves, in leaf order
  std::vector<int64_t> values_;  // their compiled-in values, in order
};

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_CALL_KEY_H_
