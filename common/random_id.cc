#include "common/random_id.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace omnistage {

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (bytes > 0 && RAND_bytes(raw.data(), static_cast<int>(bytes)) != 1) {
    std::fprintf(stderr, "omnistage: no randomness from the system (RAND_bytes failed)\n");
    std::abort();
  }
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char b : raw) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace omnistage
