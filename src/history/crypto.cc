// scrypt, AES-256-GCM and HMAC-SHA256 over OpenSSL's EVP interface.
#include "history/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <memory>

namespace gemlet::history {
namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

Result<Keys> Keys::Derive(std::string_view passphrase, std::string_view salt, int log_n) {
  if (passphrase.empty()) return Status::Error(StatusCode::kInvalidArgument, "the history key is empty");
  if (log_n < 10 || log_n > 22) {
    return Status::Error(StatusCode::kInvalidArgument, "scrypt cost log2(N) " + std::to_string(log_n) + " is not in 10..22");
  }
  const uint64_t n = uint64_t{1} << log_n;
  constexpr uint64_t r = 8, p = 1;
  // scrypt needs 128 * r * N bytes; OpenSSL's default ceiling (32 MiB) is just below N = 2^15.
  const uint64_t max_mem = 128 * r * n + (16u << 20);
  std::array<uint8_t, 96> out{};
  if (EVP_PBE_scrypt(passphrase.data(), passphrase.size(), Bytes(salt), salt.size(), n, r, p, max_mem, out.data(),
                     out.size()) != 1) {
    return Status::Error(StatusCode::kOutOfMemory, "scrypt key derivation failed (out of memory?)");
  }
  Keys keys;
  std::copy(out.begin(), out.begin() + 32, keys.field_.begin());
  std::copy(out.begin() + 32, out.begin() + 64, keys.token_.begin());
  std::copy(out.begin() + 64, out.end(), keys.check_.begin());
  OPENSSL_cleanse(out.data(), out.size());
  return keys;
}

Keys::~Keys() {
  OPENSSL_cleanse(field_.data(), field_.size());
  OPENSSL_cleanse(token_.data(), token_.size());
}

Result<std::string> Keys::Seal(std::string_view plaintext, std::string_view aad) const {
  ASSIGN_OR_RETURN(std::string out, RandomBytes(kNonceBytes));
  out.resize(kNonceBytes + plaintext.size() + kTagBytes);
  auto* data = reinterpret_cast<unsigned char*>(out.data());
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0, total = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, field_.data(), data) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
            EVP_EncryptUpdate(ctx.get(), data + kNonceBytes, &len, Bytes(plaintext), static_cast<int>(plaintext.size())) == 1;
  total = len;
  ok = ok && EVP_EncryptFinal_ex(ctx.get(), data + kNonceBytes + total, &len) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, data + kNonceBytes + plaintext.size()) == 1;
  if (!ok) return Status::Error("AES-256-GCM encryption failed");
  return out;
}

Result<std::string> Keys::Unseal(std::string_view sealed, std::string_view aad) const {
  if (sealed.size() < kNonceBytes + kTagBytes) return Status::Error("a sealed field is truncated");
  const size_t n = sealed.size() - kNonceBytes - kTagBytes;
  std::string out(n, '\0');
  auto* data = reinterpret_cast<unsigned char*>(out.data());
  std::string tag(sealed.substr(kNonceBytes + n));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, field_.data(), Bytes(sealed)) == 1 &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
            EVP_DecryptUpdate(ctx.get(), data, &len, Bytes(sealed) + kNonceBytes, static_cast<int>(n)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1;
  ok = ok && EVP_DecryptFinal_ex(ctx.get(), data + len, &len) == 1;
  if (!ok) {
    OPENSSL_cleanse(out.data(), out.size());
    return Status::Error("a sealed field does not authenticate (the store is damaged or was altered)");
  }
  return out;
}

std::string Keys::TokenHash(std::string_view token) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), token_.data(), static_cast<int>(token_.size()), Bytes(token), token.size(), mac, &mac_len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(kHex[mac[i] >> 4]);
    out.push_back(kHex[mac[i] & 15]);
  }
  return out;
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Status::Error("the system's random number generator failed");
  }
  return out;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace gemlet::history
