// libFuzzer target for the SentencePiece ModelProto reader: any input must parse or fail with a
// message, and what parses must hold the invariants the tokenizer relies on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_set>

#include "tokenizer/spm_model.h"

namespace {
void Require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = gemlet::ParseSpmModel(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!model.ok()) {
    Require(!model.message().empty());
    return 0;
  }
  Require(!model->pieces.empty());
  std::unordered_set<std::string_view> seen;
  for (const gemlet::SpmPiece& p : model->pieces) {
    Require(!p.text.empty() && p.text.size() < size);
    Require(std::isfinite(p.score));
    Require(p.type >= 1 && p.type <= 6);
    Require(seen.insert(p.text).second);
  }
  const gemlet::Status supported = gemlet::CheckSpmModelSupported(*model);
  Require(supported.ok() || !supported.message().empty());
  return 0;
}
