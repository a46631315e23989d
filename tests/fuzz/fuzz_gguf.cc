// libFuzzer target for the GGUF parser: any input must parse or fail cleanly, and what parses must be safe to use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gguf/gguf_reader.h"

namespace {
// A broken invariant is a bug the fuzzer must report, not an error to return.
void Require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gemlet::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) {
    Require(!file.message().empty());
    return 0;
  }
  const gemlet::GgufFile& f = **file;
  volatile uint8_t sink = 0;
  for (const gemlet::GgufTensor& t : f.tensors()) {
    // Every tensor lies inside the data section of the input; touching its ends lets ASan check it.
    Require(t.nbytes > 0);
    Require(t.data >= data + f.data_offset());
    Require(t.nbytes <= static_cast<size_t>(data + size - t.data));
    sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
    Require(f.FindTensor(t.name) == &t);
    sink = sink ^ static_cast<uint8_t>(t.ShapeString().size());
  }
  for (const auto& [key, value] : f.metadata()) {
    sink = sink ^ static_cast<uint8_t>(value.ToString().size());
    (void)f.GetU32(key);
    (void)f.GetF32(key);
    (void)f.GetBool(key);
    (void)f.GetString(key);
    (void)f.GetF32Array(key);
    (void)f.GetI32Array(key);
    (void)f.GetBoolArray(key);
    (void)f.GetStringArray(key);
    if (value.type == gemlet::GgufType::kArray && value.count < (1u << 20)) {
      (void)f.GetU32PerLayer(key, static_cast<uint32_t>(value.count));
    }
  }
  (void)sink;
  return 0;
}
