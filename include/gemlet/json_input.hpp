// Limits on JSON that comes from outside the process (HTTP bodies, tokenizer.json, config.json,
// session and history files, store manifests, tool-call arguments, JSON schemas): its size and
// nesting depth, checked on the raw text before any parser builds a value. A parsed value is
// walked recursively (dump(), comparisons, our own formatting), and a 100,000-deep array would
// overflow the stack; the check itself is a loop.
#pragma once

#include <cstddef>
#include <string_view>

#include "gemlet/export.h"
#include "gemlet/status.hpp"

namespace gemlet {

// Deeper than any JSON a model, a schema or an API request needs (OpenAI's structured outputs
// allow 10 levels of nesting), shallow enough that a recursive walk of it uses a few KiB of stack.
inline constexpr int kJsonMaxDepth = 128;

// Sizes by what the text is: a request body or a small file, and the large files written by tools
// (a tokenizer.json with a 262k vocabulary and 515k merges is ~35 MB).
inline constexpr size_t kJsonSmallBytes = 16u << 20;
inline constexpr size_t kJsonLargeBytes = 256u << 20;

struct JsonLimits {
  size_t max_bytes = kJsonSmallBytes;
  int max_depth = kJsonMaxDepth;
};

// The deepest nesting of arrays and objects in `text` (strings and their escapes skipped), or
// stop_above + 1 as soon as it goes deeper than stop_above. Does not validate the text.
GEMLET_CXX_API int JsonNestingDepth(std::string_view text, int stop_above);

// Whether `text` is within the limits; `what` names it in the error ("the request body is nested
// deeper than 128 levels").
GEMLET_CXX_API Status CheckJsonText(std::string_view text, std::string_view what, const JsonLimits& limits = {});

}  // namespace gemlet
