// The encoded-media caches: SHA-256 from OpenSSL's libcrypto (which cpp-httplib links already), the
// images' and the clips' keys and sizes.
#include "server/image_cache.h"

#include <openssl/evp.h>

#include <cstdio>

namespace gemlet::server {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  std::string key;
  key.reserve(2 * n);
  char hex[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    key += hex;
  }
  return key;
}

std::string ImageCache::Key(std::string_view bytes, const ImageOptions& options) {
  const ImageOptions::PanAndScan& p = options.pan_and_scan;
  std::string key = Sha256Hex(bytes) + ":" + std::to_string(options.max_soft_tokens);
  if (p.enabled) {
    key += ":pan-and-scan:" + std::to_string(p.min_crop_size) + ":" + std::to_string(p.max_crops) + ":" +
           std::to_string(p.min_ratio);
  }
  return key;
}

Result<std::shared_ptr<const EncodedMedia>> ImageCache::Encode(const Engine& engine, std::string_view bytes,
                                                                const ImageOptions& options) {
  return cache_.Get(
      Key(bytes, options),
      [&] {
        return engine.EncodeImage(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                  options);
      },
      [](const std::shared_ptr<const EncodedMedia>& media) {
        return media->embeddings.size() * sizeof(float) + sizeof(EncodedMedia);
      });
}

Result<std::vector<AudioPiece>> AudioCache::Encode(const Engine& engine, std::string_view bytes,
                                                   const AudioOptions& options) {
  // The pieces do not depend on max_seconds, which only refuses, and a server asks with its one limit
  // (ServerOptions::max_audio_seconds): the bytes alone are the key.
  return cache_.Get(
      Sha256Hex(bytes),
      [&] {
        return engine.EncodeAudioPieces(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), options);
      },
      [](const std::vector<AudioPiece>& pieces) {
        size_t bytes = 0;
        for (const AudioPiece& p : pieces) bytes += p.media->embeddings.size() * sizeof(float) + sizeof(EncodedMedia);
        return bytes;
      });
}

}  // namespace gemlet::server
