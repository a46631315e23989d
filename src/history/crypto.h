// Encryption at rest for the history store: scrypt key derivation, AES-256-GCM sealed fields and
// keyed hashes of search tokens (OpenSSL's libcrypto).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gemlet::history {

// Debian 12's SQLCipher (3.4.1, on SQLite 3.15) predates FTS5 and the SQLite we use, so the store
// encrypts its fields itself: the file stays an ordinary SQLite database whose text columns hold
// sealed blobs and whose search index holds HMACs of tokens.
class Keys {
 public:
  // scrypt(passphrase, salt, N = 2^log_n, r = 8, p = 1) gives 96 bytes: the field key, the token
  // key, and a check value stored in the clear to tell a wrong passphrase from damaged data.
  static Result<Keys> Derive(std::string_view passphrase, std::string_view salt, int log_n);
  ~Keys();
  Keys(const Keys&) = default;
  Keys& operator=(const Keys&) = default;

  std::string_view check() const { return {reinterpret_cast<const char*>(check_.data()), check_.size()}; }

  // nonce (12 random bytes) | ciphertext | tag (16 bytes). `aad` binds the field to its place
  // (table, row, column), so a sealed value moved to another row does not open there.
  Result<std::string> Seal(std::string_view plaintext, std::string_view aad) const;
  Result<std::string> Unseal(std::string_view sealed, std::string_view aad) const;
  // The first 8 bytes of HMAC-SHA256(token key, token) as 16 hex digits: what the index holds
  // instead of the token (collisions among a store's tokens are ~1 in 10^7 at a million tokens).
  std::string TokenHash(std::string_view token) const;

 private:
  Keys() = default;
  std::array<uint8_t, 32> field_{};
  std::array<uint8_t, 32> token_{};
  std::array<uint8_t, 32> check_{};
};

// n random bytes from OpenSSL's CSPRNG.
Result<std::string> RandomBytes(size_t n);
// Compares in time that does not depend on where they differ.
bool ConstantTimeEqual(std::string_view a, std::string_view b);

inline constexpr size_t kSealOverhead = 12 + 16;

}  // namespace gemlet::history
