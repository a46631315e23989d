// JSON from outside: a bracket scan before the parse, so that no deep value is ever built.
#include "base/json_input.h"

#include <string>

namespace gemlet {

int JsonNestingDepth(std::string_view text, int stop_above) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, does not end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_above) return deepest;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;  // unbalanced text is the parser's to refuse
        break;
      default: break;
    }
  }
  return deepest;
}

Status CheckJsonText(std::string_view text, std::string_view what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status::Error(std::string(what) + " is " + std::to_string(text.size()) + " bytes; at most " +
                         std::to_string(limits.max_bytes) + " are read");
  }
  if (JsonNestingDepth(text, limits.max_depth) > limits.max_depth) {
    return Status::Error(std::string(what) + " is nested deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  return Status::Ok();
}

Status JsonSyntaxError(std::string_view text, std::string_view what) {
  // Parsed again with exceptions for the parser's own words; the text failed once, so this throws.
  try {
    const nlohmann::json again = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number too large
    return Status::Error(std::string(what) + " is not valid JSON: " + e.what());
  }
  return Status::Error(std::string(what) + " is not valid JSON");
}

}  // namespace gemlet
