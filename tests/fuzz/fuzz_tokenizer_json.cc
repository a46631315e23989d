// libFuzzer target for tokenizer.json as `gemlet convert --tokenizer` reads it (HF's BPE model,
// added tokens, pre-tokenizer and normalizer): any file converts or is refused with a message, and a
// converted vocabulary loads as a tokenizer or is refused the same way.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input_file.h"
#include "tokenizer/hf_tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: the input goes to a file of this process's own.
  static const gemlet::fuzz::InputFile file(gemlet::fuzz::InputFilePath("tokenizer") + ".json");
  const std::string& where = file.path();
  const std::string path = gemlet::fuzz::WriteInputFile(where, data, size);
  if (path.empty()) return 0;
  auto meta = gemlet::ReadHfTokenizerFile(path, /*keep_merges=*/true);
  if (!meta.ok()) {
    if (meta.message().empty()) std::abort();
    return 0;
  }
  auto vocab = gemlet::VocabFromMetadata(*meta);
  if (!vocab.ok() && vocab.message().empty()) std::abort();
  return 0;
}
