// The one way in for JSON from outside (the limits are in gemlet/json_input.hpp): check the text's
// size and depth, then parse it.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"
#include "gemlet/json_input.hpp"

namespace gemlet {

// The parser's own words for text that is not JSON (where, and what it expected).
Status JsonSyntaxError(std::string_view text, std::string_view what);

// Parses `text` after CheckJsonText. JsonT is nlohmann::json, or nlohmann::ordered_json where the
// order of an object's keys is kept (chat templates print tool schemas in the order written).
template <class JsonT = nlohmann::json>
Result<JsonT> ParseJson(std::string_view text, std::string_view what, const JsonLimits& limits = {}) {
  RETURN_IF_ERROR(CheckJsonText(text, what, limits));
  JsonT value = JsonT::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return value;
  return JsonSyntaxError(text, what);
}

}  // namespace gemlet
