// The server's encoded images and clips: OpenAI's clients send the whole conversation every turn,
// its images and audio too, so media already encoded is taken from here (keyed by the SHA-256 of its
// bytes and the options it was encoded with) instead of being decoded and run through a tower again.
// The same EncodedMedia objects then meet themselves in a slot's cache, whose prefix reuse keeps
// their KV. Each cache is bounded by the embeddings' bytes, least recently used out first.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace gemlet::server {

struct ImageCacheStats {
  uint64_t encodes = 0;    // media decoded and encoded (misses; failures included)
  uint64_t hits = 0;       // taken from the cache
  uint64_t evictions = 0;  // entries dropped to stay within the bound
  uint64_t entries = 0;
  uint64_t bytes = 0;      // the embeddings held
  double encode_seconds = 0;
};

// The hex SHA-256 of bytes.
std::string Sha256Hex(std::string_view bytes);

// What one key encodes to (an image's media, a clip's pieces), kept least recently used out first
// within max_bytes (`size` says what an entry costs). Thread-safe. Two requests that bring the same
// new bytes at once may both encode them; the cache keeps one.
template <class Value>
class EncodedCache {
 public:
  explicit EncodedCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  Result<Value> Get(const std::string& key, const std::function<Result<Value>()>& encode,
                    const std::function<size_t(const Value&)>& size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = index_.find(key); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++stats_.hits;
        return it->second->value;
      }
    }
    // Not under the lock: encoding takes a while, and other requests' media may be cached meanwhile.
    const auto start = std::chrono::steady_clock::now();
    Result<Value> encoded = encode();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.encodes;
    stats_.encode_seconds += seconds;
    if (!encoded.ok()) return encoded;
    if (auto it = index_.find(key); it != index_.end()) {  // another request encoded it meanwhile
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->value;
    }
    const size_t bytes = size(encoded.value());
    if (bytes > max_bytes_) return encoded;  // larger than the whole cache: used, not kept
    lru_.push_front(Entry{key, encoded.value(), bytes});
    index_[key] = lru_.begin();
    stats_.bytes += bytes;
    while (stats_.bytes > max_bytes_ && !lru_.empty()) {
      stats_.bytes -= lru_.back().bytes;
      index_.erase(lru_.back().key);
      lru_.pop_back();
      ++stats_.evictions;
    }
    stats_.entries = lru_.size();
    return encoded;
  }

  ImageCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void Clear() {  // the model unloaded: its media goes with it
    std::lock_guard<std::mutex> lock(mutex_);
    lru_.clear();
    index_.clear();
    stats_.bytes = 0;
    stats_.entries = 0;
  }

 private:
  struct Entry {
    std::string key;
    Value value;
    size_t bytes = 0;
  };
  size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
  ImageCacheStats stats_;
};

// Encoded images.
class ImageCache {
 public:
  explicit ImageCache(size_t max_bytes) : cache_(max_bytes) {}

  // The image encoded by `engine`, or the one encoded before from the same bytes and options.
  Result<std::shared_ptr<const EncodedMedia>> Encode(const Engine& engine, std::string_view bytes,
                                                     const ImageOptions& options);
  ImageCacheStats stats() const { return cache_.stats(); }
  void Clear() { cache_.Clear(); }

  // The key: the bytes' SHA-256 (hex) and the options.
  static std::string Key(std::string_view bytes, const ImageOptions& options);

 private:
  EncodedCache<std::shared_ptr<const EncodedMedia>> cache_;
};

// Encoded clips: the pieces Engine::EncodeAudioPieces cut a clip into (one for a clip within the
// model's window).
class AudioCache {
 public:
  explicit AudioCache(size_t max_bytes) : cache_(max_bytes) {}

  Result<std::vector<AudioPiece>> Encode(const Engine& engine, std::string_view bytes, const AudioOptions& options);
  ImageCacheStats stats() const { return cache_.stats(); }
  void Clear() { cache_.Clear(); }

 private:
  EncodedCache<std::vector<AudioPiece>> cache_;
};

}  // namespace gemlet::server
