// call_key.cc — an entry's key: signature words plus compiled-in values
// (call_key.h).
#include "call_key.h"

#include <cstring>
#include <string>

namespace cutecall::py {

ErrorOr<CallKey> CallKey::Make(const CallWords& call, const StaticMask* masks,
                               size_t num_masks) {
  if (num_masks > call.n) {
    return InvalidArgument("cutecall: " + std::to_string(num_masks) +
                           " static masks for a call of " +
                           std::to_string(call.n) + " leaves");
  }
  CallKey key;
  key.words_.assign(call.signature, call.signature + call.sig_len);
  int64_t values[2 * abi::kMaxRank];
  for (size_t i = 0; i < num_masks; ++i) {
    if (masks[i] == 0) continue;
    if (call.tag(i) != kTagTensor) {
      return InvalidArgument("cutecall: a static mask for leaf " +
                             std::to_string(i) + ", which is not a tensor");
    }
    const size_t k = AppendStaticValues(call.tensors[i], masks[i], values);
    if (k == 0) continue;  // only bits past the tensor's rank
    key.checks_.push_back(Check{uint32_t(i), masks[i]});
    key.values_.insert(key.values_.end(), values, values + k);
  }
  return key;
}

bool CallKey::MatchesStatic(const CallWords& call) const {
  // Equal words (Matches): equal ranks, so each check writes as many values
  // as it did when the key was made.
  const int64_t* expected = values_.data();
  int64_t values[2 * abi::kMaxRank];
  for (const Check& c : checks_) {
    const size_t k = AppendStaticValues(call.tensors[c.leaf], c.mask, values);
    if (std::memcmp(values, expected, k * sizeof(int64_t)) != 0) return false;
    expected += k;
  }
  return true;
}

}  // namespace cutecall::py
