// libFuzzer target for the JSON-schema compiler behind response_format and Ollama's format: any
// schema compiles or is refused with a message (deep, recursive and self-referencing schemas, huge
// enums and bounds included), and a compiled grammar has a start.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sampling/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = gemlet::CompileJsonSchema(text);
  if (!g.ok() && g.message().empty()) std::abort();
  auto f = gemlet::GrammarForResponseFormat(text);
  if (!f.ok() && f.message().empty()) std::abort();
  return 0;
}
