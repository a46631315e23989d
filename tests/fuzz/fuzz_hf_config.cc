// libFuzzer target for what `gemlet convert` reads before any tensor: config.json (every family's
// fields, nested text_config/vision_config) and the store's manifests and catalogs. Any input parses
// or is refused with a message naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "convert/hf_config.h"
#include "gemlet/store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = gemlet::ParseHfConfig(text, "config.json");
  if (!config.ok() && config.message().find("config.json") == std::string::npos) std::abort();
  auto manifest = gemlet::Manifest::Parse(text, "manifest.json");
  if (!manifest.ok() && manifest.message().find("manifest.json") == std::string::npos) std::abort();
  return 0;
}
