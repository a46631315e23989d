// libFuzzer target for tokenizer.json as `gemlet convert --tokenizer` reads it (HF's BPE model,
// added tokens, pre-tokenizer and normalizer): any file converts or is refused with a message, and a
// converted vocabulary loads as a tokenizer or is refused the same way.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokenizer/hf_tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: the input goes to a file of this process's own.
  static const std::string path = "/tmp/gemlet-fuzz-tokenizer-" + std::to_string(::getpid()) + ".json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto meta = gemlet::ReadHfTokenizerFile(path, /*keep_merges=*/true);
  if (!meta.ok()) {
    if (meta.message().empty()) std::abort();
    return 0;
  }
  auto vocab = gemlet::VocabFromMetadata(*meta);
  if (!vocab.ok() && vocab.message().empty()) std::abort();
  return 0;
}
