// The server's encoded images: OpenAI's clients send the whole conversation every turn, its images
// too, so an image already encoded is taken from here (keyed by the SHA-256 of its bytes and the
// options it was encoded with) instead of being decoded and run through the vision tower again.
// The same EncodedMedia object then meets itself in a slot's cache, whose prefix reuse keeps the
// image's KV. Bounded by the embeddings' bytes, least recently used out first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gemlet/gemlet.hpp"

namespace gemlet::server {

struct ImageCacheStats {
  uint64_t encodes = 0;    // images decoded and encoded (misses; failures included)
  uint64_t hits = 0;       // images taken from the cache
  uint64_t evictions = 0;  // entries dropped to stay within the bound
  uint64_t entries = 0;
  uint64_t bytes = 0;      // the embeddings held
  double encode_seconds = 0;
};

// Thread-safe. Two requests that bring the same new image at once may both encode it; the cache
// keeps one.
class ImageCache {
 public:
  explicit ImageCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The image encoded by `engine`, or the one encoded before from the same bytes and options.
  Result<std::shared_ptr<const EncodedMedia>> Encode(const Engine& engine, std::string_view bytes,
                                                     const ImageOptions& options);
  ImageCacheStats stats() const;
  void Clear();  // the model unloaded: its images go with it

  // The key: the bytes' SHA-256 (hex) and the options.
  static std::string Key(std::string_view bytes, const ImageOptions& options);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const EncodedMedia> media;
    size_t bytes = 0;
  };
  size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  ImageCacheStats stats_;
};

}  // namespace gemlet::server
