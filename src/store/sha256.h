// SHA-256 (OpenSSL's libcrypto) of bytes and of files, as lowercase hex: the digests the model store
// checks downloads, patches and installed models against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gemlet::store {

// Incremental: Update any number of times, then Finish once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void Update(const void* data, size_t size);
  void Update(std::string_view bytes) { Update(bytes.data(), bytes.size()); }
  std::string FinishHex();  // 64 lowercase hex digits; the object is spent after it

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string Sha256Hex(std::string_view bytes);
// The digest of a whole file, read in large blocks; progress, if given, gets (bytes read, total).
Result<std::string> Sha256File(const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress = {});
// 64 hex digits (either case): the digest lowercased; anything else is an error naming the text.
Result<std::string> ParseSha256Hex(std::string_view text);

}  // namespace gemlet::store
