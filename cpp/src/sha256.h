// sha256.h — SHA-256 (FIPS 180-4) of a byte string.
//
// Owns: the digest used to name every compiled object. Module bytes are
// verified against their digest before they are handed to the DSL runtime.
#ifndef CUTECALL_SRC_SHA256_H_
#define CUTECALL_SRC_SHA256_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cutecall {

using Digest = std::array<uint8_t, 32>;

Digest Sha256(std::string_view bytes);
// Lower-case hex, 64 characters.
std::string ToHex(const Digest& digest);
// Parses 64 hex characters; false on any other input.
bool FromHex(std::string_view hex, Digest* out);

}  // namespace cutecall

#endif  // CUTECALL_SRC_SHA256_H_
