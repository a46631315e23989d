// The encoded-image cache: SHA-256 from OpenSSL's libcrypto (which cpp-httplib links already), an
// LRU list bounded by the embeddings' bytes.
#include "server/image_cache.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>

namespace gemlet::server {

std::string ImageCache::Key(std::string_view bytes, const ImageOptions& options) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  std::string key;
  key.reserve(2 * n + 16);
  char hex[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    key += hex;
  }
  return key + ":" + std::to_string(options.max_soft_tokens);
}

Result<std::shared_ptr<const EncodedMedia>> ImageCache::Encode(const Engine& engine, std::string_view bytes,
                                                                const ImageOptions& options) {
  const std::string key = Key(bytes, options);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->media;
    }
  }
  // Not under the lock: encoding takes a while, and other requests' images may be cached meanwhile.
  const auto start = std::chrono::steady_clock::now();
  Result<std::shared_ptr<const EncodedMedia>> encoded = engine.EncodeImage(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.encodes;
  stats_.encode_seconds += seconds;
  if (!encoded.ok()) return encoded;
  const std::shared_ptr<const EncodedMedia>& media = encoded.value();
  if (auto it = index_.find(key); it != index_.end()) {  // another request encoded it meanwhile
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->media;
  }
  const size_t size = media->embeddings.size() * sizeof(float) + sizeof(EncodedMedia);
  if (size > max_bytes_) return encoded;  // larger than the whole cache: used, not kept
  lru_.push_front(Entry{key, media, size});
  index_[key] = lru_.begin();
  stats_.bytes += size;
  while (stats_.bytes > max_bytes_ && !lru_.empty()) {
    stats_.bytes -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
    ++stats_.evictions;
  }
  stats_.entries = lru_.size();
  return encoded;
}

ImageCacheStats ImageCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void ImageCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  lru_.clear();
  index_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
}

}  // namespace gemlet::server
