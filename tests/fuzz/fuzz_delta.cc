// libFuzzer target for the patch files `gemlet patch` and the store's update read: any file's
// self-description (magic, version, index and its digest, sizes) reads or is refused with a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input_file.h"
#include "store/delta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gemlet::fuzz::InputFile file(gemlet::fuzz::InputFilePath("delta") + ".gpatch");
  const std::string& where = file.path();
  const std::string path = gemlet::fuzz::WriteInputFile(where, data, size);
  if (path.empty()) return 0;
  auto info = gemlet::store::ReadDeltaPatchInfo(path);
  if (!info.ok() && info.message().empty()) std::abort();
  return 0;
}
