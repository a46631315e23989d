#include "store/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gemlet::store {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Update(const void* data, size_t size) { EVP_DigestUpdate(state_->ctx, data, size); }

std::string Sha256::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(state_->ctx, digest, &n);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.FinishHex();
}

Result<std::string> Sha256File(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::Error("cannot read '" + path + "': " + std::strerror(errno));
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  const uint64_t total = size > 0 ? static_cast<uint64_t>(size) : 0;
  std::vector<char> block(4 << 20);
  Sha256 h;
  uint64_t done = 0;
  for (;;) {
    const size_t n = std::fread(block.data(), 1, block.size(), f);
    if (n > 0) {
      h.Update(block.data(), n);
      done += n;
      if (progress) progress(done, total);
    }
    if (n < block.size()) break;
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Error("cannot read '" + path + "': a read failed");
  return h.FinishHex();
}

Result<std::string> ParseSha256Hex(std::string_view text) {
  std::string out(text);
  bool ok = out.size() == 64;
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (!ok) {
    std::string message = "'";  // appended piecewise: GCC 12 warns (-Wrestrict) on a chain of + here
    message.append(text);
    message.append("' is not a SHA-256 digest (64 hex digits)");
    return Status::Error(message);
  }
  return out;
}

}  // namespace gemlet::store
