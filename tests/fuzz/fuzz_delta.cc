// libFuzzer target for the patch files `gemlet patch` and the store's update read: any file's
// self-description (magic, version, index and its digest, sizes) reads or is refused with a message.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/delta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/gemlet-fuzz-delta-" + std::to_string(::getpid()) + ".gpatch";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto info = gemlet::store::ReadDeltaPatchInfo(path);
  if (!info.ok() && info.message().empty()) std::abort();
  return 0;
}
