// Gemma 4 tool text: a transcription of the official template's macros (format_parameters,
// format_function_declaration, format_argument, format_tool_response_block) over JSON values, with
// Jinja's and Python's semantics where they show (dictsort, truthiness, str() of numbers and None),
// and a parser for the calls the model writes.
#include "runtime/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "runtime/session.h"

namespace gemlet::runtime {

namespace {

// Insertion order matters: dictsort is stable, so keys equal but for case keep the order written.
using Json = nlohmann::ordered_json;

constexpr std::string_view kQuote = "<|\"|>";  // Gemma 4's string delimiter, a token of its own

// Formatting recurses over the value: ParseJson bounds its nesting rather than the stack.
Result<Json> ParseToolJson(std::string_view text, const std::string& what) { return ParseJson<Json>(text, what); }

// Jinja's value['key']: undefined (nullptr) when the value is not a mapping or lacks the key.
const Json* Get(const Json* v, const char* key) {
  if (v == nullptr || !v->is_object()) return nullptr;
  auto it = v->find(key);
  return it == v->end() ? nullptr : &*it;
}

// Python truthiness; undefined is false.
bool Truthy(const Json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number_float()) return v->get<double>() != 0;
  if (v->is_number()) return v->get<int64_t>() != 0;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  return !v->empty();
}

// Python's repr() of a float: the shortest digits that round-trip, in exponent form when the
// decimal point would sit more than 16 places left or 4 places right of the digits.
std::string PyFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  const std::string s(buf, r.ptr);  // d[.ddd]e±XX
  const size_t e = s.find('e');
  const int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  std::string out = v < 0 ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp10);
    out += std::string(exp10 < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(decpt - n, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string PyStr(const Json& v);

// Python's repr(); strings quoted as Python quotes them (control characters escaped, the rest kept).
std::string PyRepr(const Json& v) {
  if (!v.is_string()) return PyStr(v);
  const std::string& s = v.get_ref<const std::string&>();
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      out += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
    } else out += c;
  }
  return out + q;
}

// Python's str(), what Jinja prints for {{ value }}.
std::string PyStr(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string: return v.get<std::string>();
    case Json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Json::value_t::null: return "None";
    case Json::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case Json::value_t::number_float: return PyFloat(v.get<double>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + PyRepr(v[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        out += (first ? "" : ", ") + PyRepr(Json(k)) + ": " + PyRepr(x);
        first = false;
      }
      return out + "}";
    }
    default: return "";
  }
}

std::string Print(const Json* v) { return v == nullptr ? "" : PyStr(*v); }  // undefined prints ""

// Jinja's upper filter (ASCII letters: schema types are ASCII).
std::string Upper(const Json* v) {
  std::string s = Print(v);
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Jinja's dictsort: by key, case-insensitively (Python's str.lower(); ASCII here), stable. UTF-8
// byte order is code point order, as Python compares.
std::vector<std::pair<std::string, const Json*>> DictSort(const Json& object) {
  std::vector<std::pair<std::string, const Json*>> items;
  for (const auto& [k, v] : object.items()) items.emplace_back(k, &v);
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return AsciiLower(a.first) < AsciiLower(b.first); });
  return items;
}

// Python's iteration over a value in a {% for %}: a list's items, a string's characters, a mapping's keys.
Result<std::vector<Json>> Iterate(const Json& v, const std::string& what) {
  std::vector<Json> out;
  if (v.is_array()) {
    for (const Json& x : v) out.push_back(x);
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.items()) out.emplace_back(k);
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    for (size_t i = 0; i < s.size();) {
      size_t n = 1;
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0xf0) n = 4;
      else if (c >= 0xe0) n = 3;
      else if (c >= 0xc0) n = 2;
      out.emplace_back(s.substr(i, n));
      i += n;
    }
  } else {
    return Status::Error(what + " must be a list, not " + std::string(v.type_name()));
  }
  return out;
}

void Quoted(const std::string& text, SegmentWriter* out) {
  out->Markup(std::string(kQuote));
  out->Content(text);
  out->Markup(std::string(kQuote));
}

// format_argument: strings quoted, booleans lower-case, mappings by dictsort, other values as str().
void FormatArgument(const Json& a, bool escape_keys, SegmentWriter* out) {
  if (a.is_string()) {
    Quoted(a.get<std::string>(), out);
  } else if (a.is_boolean()) {
    out->Content(a.get<bool>() ? "true" : "false");
  } else if (a.is_object()) {
    out->Content("{");
    bool first = true;
    for (const auto& [key, value] : DictSort(a)) {
      if (!first) out->Content(",");
      first = false;
      if (escape_keys) Quoted(key, out);
      else out->Content(key);
      out->Content(":");
      FormatArgument(*value, escape_keys, out);
    }
    out->Content("}");
  } else if (a.is_array()) {
    out->Content("[");
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out->Content(",");
      FormatArgument(a[i], escape_keys, out);
    }
    out->Content("]");
  } else {
    out->Content(PyStr(a));
  }
}

// required:[<|"|>a<|"|>,...] from a value the template iterates.
Status WriteRequired(const Json& list, const std::string& what, SegmentWriter* out) {
  ASSIGN_OR_RETURN(std::vector<Json> items, Iterate(list, what));
  out->Content("required:[");
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out->Content(",");
    Quoted(PyStr(items[i]), out);
  }
  out->Content("]");
  return Status::Ok();
}

Status FormatParameters(const Json& properties, bool interleaved, int depth, SegmentWriter* out);

// The items:{...} body of an array property.
Status WriteItems(const Json& items, bool interleaved, int depth, SegmentWriter* out) {
  bool first = true;
  for (const auto& [key, value] : DictSort(items)) {
    if (value->is_null()) continue;
    if (!first) out->Content(",");
    first = false;
    if (key == "properties") {
      out->Content("properties:{");
      if (value->is_object()) RETURN_IF_ERROR(FormatParameters(*value, interleaved, depth + 1, out));
      out->Content("}");
    } else if (key == "required") {
      RETURN_IF_ERROR(WriteRequired(*value, "items.required", out));
    } else if (key == "type") {
      out->Content("type:");
      if (value->is_string()) {
        FormatArgument(Json(Upper(value)), true, out);
      } else {
        ASSIGN_OR_RETURN(std::vector<Json> types, Iterate(*value, "items.type"));
        Json upper = Json::array();
        for (const Json& t : types) upper.push_back(Upper(&t));
        FormatArgument(upper, true, out);
      }
    } else {
      out->Content(key + ":");
      FormatArgument(*value, true, out);
    }
  }
  return Status::Ok();
}

// format_parameters: each property (schema keywords skipped, as the template skips them) as
// name:{description,enum|items,nullable,properties,required,type}; the interleaved template puts
// nullable before enum/items/properties.
Status FormatParameters(const Json& properties, bool interleaved, int depth, SegmentWriter* out) {
  if (depth > 64) return Status::Error("tool parameters are nested deeper than 64 levels");
  if (!properties.is_object()) return Status::Error("tool parameter properties must be an object");
  static const std::unordered_set<std::string> kStandardKeys = {"description", "type", "properties", "required",
                                                                "nullable"};
  bool found_first = false;
  for (const auto& entry : DictSort(properties)) {
    // Named, not a structured binding: the lambdas below capture them (clang 14 cannot capture bindings).
    const std::string& key = entry.first;
    const auto& value = entry.second;
    if (kStandardKeys.count(key)) continue;
    if (found_first) out->Content(",");
    found_first = true;
    out->Content(key + ":{");
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) out->Content(",");
      add_comma = true;
    };
    if (const Json* d = Get(value, "description"); Truthy(d)) {
      out->Content("description:");
      Quoted(PyStr(*d), out);
      add_comma = true;
    }
    const std::string type = Upper(Get(value, "type"));
    // The interleaved template writes "," before items, properties and required whether or not one
    // is due ("{,properties:{...}type:..." without a description), and leaves add_comma alone.
    auto lead = [&] {
      if (interleaved) out->Content(",");
      else comma();
    };
    auto write_nullable = [&] {
      if (Truthy(Get(value, "nullable"))) {
        comma();
        out->Content("nullable:true");
      }
    };
    // Without "properties" the template lists the schema's own other keys as if they were properties.
    auto write_object = [&]() -> Status {
      const Json* nested = Get(value, "properties");
      lead();
      out->Content("properties:{");
      RETURN_IF_ERROR(FormatParameters(nested && nested->is_object() ? *nested : *value, interleaved, depth + 1, out));
      out->Content("}");
      if (const Json* r = Get(value, "required"); Truthy(r)) {
        lead();
        RETURN_IF_ERROR(WriteRequired(*r, key + ".required", out));
      }
      return Status::Ok();
    };
    if (interleaved) write_nullable();
    if (type == "STRING") {
      if (const Json* e = Get(value, "enum"); Truthy(e)) {
        comma();
        out->Content("enum:");
        FormatArgument(*e, true, out);
      }
    } else if (type == "ARRAY") {
      if (const Json* items = Get(value, "items"); items != nullptr && items->is_object() && !items->empty()) {
        lead();
        out->Content("items:{");
        RETURN_IF_ERROR(WriteItems(*items, interleaved, depth, out));
        out->Content("}");
      }
    } else if (interleaved && type == "OBJECT") {
      RETURN_IF_ERROR(write_object());
    }
    if (!interleaved) {
      write_nullable();
      if (type == "OBJECT") RETURN_IF_ERROR(write_object());
    }
    comma();
    out->Content("type:");
    Quoted(type, out);
    out->Content("}");
  }
  return Status::Ok();
}

// format_function_declaration.
Status WriteDeclaration(const Json& function, bool interleaved, SegmentWriter* out) {
  out->Content("declaration:" + Print(Get(&function, "name")) + "{description:");
  Quoted(Print(Get(&function, "description")), out);
  if (const Json* params = Get(&function, "parameters"); Truthy(params)) {
    out->Content(",parameters:{");
    if (const Json* props = Get(params, "properties"); Truthy(props)) {
      out->Content("properties:{");
      RETURN_IF_ERROR(FormatParameters(*props, interleaved, 0, out));
      out->Content("},");
    }
    if (const Json* req = Get(params, "required"); Truthy(req)) {
      RETURN_IF_ERROR(WriteRequired(*req, "parameters.required", out));
      out->Content(",");
    }
    // Without a type the template leaves parameters:{ open and the comma before it standing.
    if (const Json* type = Get(params, "type"); Truthy(type)) {
      out->Content("type:");
      Quoted(Upper(type), out);
      out->Content("}");
    }
  }
  if (function.contains("response")) {
    const Json* response = Get(&function, "response");
    out->Content(",response:{");
    if (const Json* d = Get(response, "description"); Truthy(d)) {
      out->Content("description:");
      Quoted(PyStr(*d), out);
      out->Content(",");
    }
    if (Upper(Get(response, "type")) == "OBJECT") {
      out->Content("type:");
      Quoted("OBJECT", out);
      out->Content("}");
    }
  }
  out->Content("}");
  return Status::Ok();
}

Result<Json> ParseTools(std::string_view tools_json) {
  ASSIGN_OR_RETURN(Json tools, ParseToolJson(tools_json, "tools"));
  if (!tools.is_array()) return Status::Error("tools must be a JSON array of {\"type\":\"function\",\"function\":{...}}");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json* f = Get(&tools[i], "function");
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (f == nullptr || !f->is_object()) return Status::Error(where + " has no \"function\" object");
    const Json* name = Get(f, "name");
    if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return Status::Error(where + ".function has no name");
    }
  }
  return tools;
}

Result<Json> ParseArguments(const ToolCall& call) {
  if (call.arguments.empty()) return Json::object();
  ASSIGN_OR_RETURN(Json args, ParseToolJson(call.arguments, "the arguments of tool call '" + call.name + "'"));
  if (!args.is_object()) return Status::Error("the arguments of tool call '" + call.name + "' must be a JSON object");
  return args;
}

// call:NAME{key:value,...}: the arguments' keys bare, as the template writes a call.
void WriteCallBody(const std::string& name, const Json& args, SegmentWriter* out) {
  out->Content("call:" + name + "{");
  bool first = true;
  for (const auto& [key, value] : DictSort(args)) {
    if (!first) out->Content(",");
    first = false;
    out->Content(key + ":");
    FormatArgument(*value, false, out);
  }
  out->Content("}");
}

// The parser of ParseGemma4ToolCall: writes compact JSON as it reads.
class CallParser {
 public:
  explicit CallParser(std::string_view text) : t_(text) {}

  Status Arguments(std::string* json) {
    RETURN_IF_ERROR(Object(json, 0));
    SkipSpace();
    if (pos_ != t_.size()) return Fail("unexpected text after the arguments' closing '}'");
    return Status::Ok();
  }
  void Seek(size_t pos) { pos_ = pos; }

 private:
  static constexpr int kMaxDepth = 100;

  Status Fail(const std::string& what) const {
    return Status::Error("tool call: " + what + " at byte " + std::to_string(pos_));
  }
  bool AtQuote() const { return t_.substr(pos_, kQuote.size()) == kQuote; }
  void SkipSpace() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\n' || t_[pos_] == '\t' || t_[pos_] == '\r')) ++pos_;
  }
  static std::string JsonString(std::string_view s) {
    return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // <|"|>...<|"|>: everything up to the next delimiter, verbatim.
  Status String(std::string* raw) {
    pos_ += kQuote.size();
    const size_t end = t_.find(kQuote, pos_);
    if (end == std::string_view::npos) return Fail("unterminated <|\"|> string");
    *raw = std::string(t_.substr(pos_, end - pos_));
    pos_ = end + kQuote.size();
    return Status::Ok();
  }

  Status Key(std::string* key) {
    SkipSpace();
    if (AtQuote()) {
      RETURN_IF_ERROR(String(key));
      SkipSpace();
    } else {
      const size_t begin = pos_;
      while (pos_ < t_.size() && t_[pos_] != ':') {
        if (std::string_view("{}[],").find(t_[pos_]) != std::string_view::npos || AtQuote()) {
          return Fail("expected a key and ':'");
        }
        ++pos_;
      }
      size_t end = pos_;
      while (end > begin && (t_[end - 1] == ' ' || t_[end - 1] == '\n' || t_[end - 1] == '\t' || t_[end - 1] == '\r')) --end;
      *key = std::string(t_.substr(begin, end - begin));
      if (key->empty()) return Fail("expected a key");
    }
    if (pos_ >= t_.size() || t_[pos_] != ':') return Fail("expected ':' after a key");
    ++pos_;
    return Status::Ok();
  }

  Status Object(std::string* json, int depth) {
    if (depth >= kMaxDepth) return Fail("arguments nested deeper than 100 levels");
    if (pos_ >= t_.size() || t_[pos_] != '{') return Fail("expected '{'");
    ++pos_;
    *json += '{';
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      ++pos_;
      *json += '}';
      return Status::Ok();
    }
    std::unordered_set<std::string> seen;
    for (;;) {
      std::string key;
      const size_t key_pos = pos_;
      RETURN_IF_ERROR(Key(&key));
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        return Fail("duplicate key '" + key + "'");
      }
      if (seen.size() > 1) *json += ',';
      *json += JsonString(key) + ':';
      RETURN_IF_ERROR(Value(json, depth + 1));
      SkipSpace();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (pos_ < t_.size() && t_[pos_] == '}') return Fail("trailing ',' before '}'");
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == '}') {
        ++pos_;
        *json += '}';
        return Status::Ok();
      }
      return Fail(pos_ >= t_.size() ? "unterminated '{'" : "expected ',' or '}'");
    }
  }

  Status Array(std::string* json, int depth) {
    if (depth >= kMaxDepth) return Fail("arguments nested deeper than 100 levels");
    ++pos_;
    *json += '[';
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      ++pos_;
      *json += ']';
      return Status::Ok();
    }
    for (bool first = true;; first = false) {
      if (!first) *json += ',';
      RETURN_IF_ERROR(Value(json, depth + 1));
      SkipSpace();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (pos_ < t_.size() && t_[pos_] == ']') return Fail("trailing ',' before ']'");
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == ']') {
        ++pos_;
        *json += ']';
        return Status::Ok();
      }
      return Fail(pos_ >= t_.size() ? "unterminated '['" : "expected ',' or ']'");
    }
  }

  // A JSON number, copied verbatim (big integers keep their digits).
  Status Number(std::string* json) {
    const size_t begin = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (t_[pos_] == '-') ++pos_;
    const size_t int_begin = pos_;
    const size_t n = digits();
    if (n == 0 || (n > 1 && t_[int_begin] == '0')) return Fail("malformed number");
    if (pos_ < t_.size() && t_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Fail("malformed number");
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Fail("malformed number");
    }
    *json += t_.substr(begin, pos_ - begin);
    return Status::Ok();
  }

  Status Value(std::string* json, int depth) {
    SkipSpace();
    if (pos_ >= t_.size()) return Fail("expected a value");
    if (AtQuote()) {
      std::string s;
      RETURN_IF_ERROR(String(&s));
      *json += JsonString(s);
      return Status::Ok();
    }
    const char c = t_[pos_];
    if (c == '{') return Object(json, depth);
    if (c == '[') return Array(json, depth);
    const size_t begin = pos_;
    if (c == '-' || (c >= '0' && c <= '9')) {
      RETURN_IF_ERROR(Number(json));
    } else {
      while (pos_ < t_.size() && ((t_[pos_] >= 'a' && t_[pos_] <= 'z') || (t_[pos_] >= 'A' && t_[pos_] <= 'Z'))) ++pos_;
      const std::string_view word = t_.substr(begin, pos_ - begin);
      if (word == "true" || word == "false") *json += word;
      else if (word == "null" || word == "None") *json += "null";  // None: the template's str() of null
      else {
        pos_ = begin;
        return Fail("expected a value (<|\"|>string<|\"|>, number, true, false, null, {...} or [...])");
      }
    }
    // A value ends at a delimiter: "3x" or "truex" is not a value.
    if (pos_ < t_.size() && std::string_view(",}] \n\t\r").find(t_[pos_]) == std::string_view::npos) {
      return Fail("unexpected character after a value");
    }
    return Status::Ok();
  }

  std::string_view t_;
  size_t pos_ = 0;
};

}  // namespace

void SegmentWriter::Add(const std::string& text, bool content) {
  if (text.empty()) return;
  if (!segments_.empty() && segments_.back().is_content == content && segments_.back().media < 0) {
    segments_.back().text += text;
  }
  else {
    segments_.push_back({text, content});
  }
}

Status WriteGemma4ToolDeclarations(std::string_view tools_json, bool interleaved, SegmentWriter* out) {
  ASSIGN_OR_RETURN(Json tools, ParseTools(tools_json));
  for (size_t i = 0; i < tools.size(); ++i) {
    out->Markup("<|tool>");
    Status s = WriteDeclaration(tools[i]["function"], interleaved, out);
    if (!s.ok()) return s.WithContext("tools[" + std::to_string(i) + "]");
    out->Markup("<tool|>");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> DeclaredToolNames(std::string_view tools_json) {
  if (tools_json.empty() || tools_json == "null") return std::vector<std::string>();
  ASSIGN_OR_RETURN(Json tools, ParseTools(tools_json));
  std::vector<std::string> names;
  for (const Json& t : tools) names.push_back(t["function"]["name"].get<std::string>());
  return names;
}

Status WriteGemma4ToolCall(const ToolCall& call, SegmentWriter* out) {
  ASSIGN_OR_RETURN(Json args, ParseArguments(call));
  out->Markup("<|tool_call>");
  WriteCallBody(call.name, args, out);
  out->Markup("<tool_call|>");
  return Status::Ok();
}

void WriteGemma4ToolResponse(const std::string& name, const std::string& content, SegmentWriter* out) {
  out->Markup("<|tool_response>");
  out->Content("response:" + name + "{value:");
  Quoted(content, out);
  out->Content("}");
  out->Markup("<tool_response|>");
}

Result<std::string> FormatGemma4ToolCall(std::string_view name, std::string_view arguments_json) {
  ASSIGN_OR_RETURN(Json args, ParseArguments(ToolCall{std::string(name), std::string(arguments_json)}));
  SegmentWriter w;
  WriteCallBody(std::string(name), args, &w);
  std::string text;
  for (const ChatSegment& s : w.Take()) text += s.text;
  return text;
}

Result<ToolCall> ParseGemma4ToolCall(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string_view t = text.substr(begin, end - begin);
  // The decode loop hands over the text without its markers; raw model text may still hold them.
  if (t.substr(0, 12) == "<|tool_call>") t.remove_prefix(12);
  if (t.size() >= 12 && t.substr(t.size() - 12) == "<tool_call|>") t.remove_suffix(12);
  if (t.substr(0, 5) != "call:") return Status::Error("tool call: expected \"call:NAME{...}\", got no \"call:\"");
  const size_t brace = t.find('{', 5);
  if (brace == std::string_view::npos) return Status::Error("tool call: no '{' after the function name");
  ToolCall call;
  call.name = std::string(t.substr(5, brace - 5));
  if (call.name.empty()) return Status::Error("tool call: the function name is empty");
  for (const char c : call.name) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::string_view("}[],:\"<>").find(c) != std::string_view::npos) {
      return Status::Error("tool call: the function name '" + call.name + "' holds '" + std::string(1, c) + "'");
    }
  }
  CallParser parser(t);
  parser.Seek(brace);
  RETURN_IF_ERROR(parser.Arguments(&call.arguments));
  return call;
}

ToolCall ToolCallFromModelText(const std::string& text) {
  if (Result<ToolCall> parsed = ParseGemma4ToolCall(text); parsed.ok()) return std::move(parsed).value();
  ToolCall call;
  const std::string_view t(text);
  const size_t brace = t.find('{');
  if (t.rfind("call:", 0) == 0 && brace != std::string_view::npos) {
    call.name = std::string(t.substr(5, brace - 5));
    call.arguments = std::string(t.substr(brace));
  } else {
    call.arguments = text;
  }
  return call;
}

Result<ToolChoice> ParseToolChoice(std::string_view json) {
  ToolChoice choice;
  if (json.empty()) return choice;
  ASSIGN_OR_RETURN(Json j, ParseToolJson(json, "tool_choice"));
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "auto") return choice;
    if (s == "none") choice.mode = ToolChoice::kNone;
    else if (s == "required") choice.mode = ToolChoice::kRequired;
    else return Status::Error("tool_choice \"" + s + "\": expected \"auto\", \"none\", \"required\" or a function");
    return choice;
  }
  const Json* name = Get(Get(&j, "function"), "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return Status::Error("tool_choice: expected \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}");
  }
  choice.mode = ToolChoice::kFunction;
  choice.function = name->get<std::string>();
  return choice;
}

namespace {

// ToolChoiceConstraint's walk: before the call (at most one thought channel at a time), the
// forced opening of a named call, then the model's own text.
class ToolChoiceMask final : public TokenConstraint {
 public:
  ToolChoiceMask(int n_vocab, int32_t channel_open, int32_t channel_close, int32_t call_open, std::vector<int32_t> forced,
                 std::vector<int32_t> ends)
      : n_vocab_(n_vocab),
        channel_open_(channel_open),
        channel_close_(channel_close),
        call_open_(call_open),
        forced_(std::move(forced)),
        ends_(std::move(ends)) {}

  void Mask(float* logits, int remaining_tokens) override {
    (void)remaining_tokens;
    const float none = -std::numeric_limits<float>::infinity();
    switch (state_) {
      case State::kBeforeCall: {
        // The answer opens with the call, or with a thought before it.
        const float call = logits[call_open_], think = channel_open_ >= 0 ? logits[channel_open_] : none;
        std::fill(logits, logits + n_vocab_, none);
        logits[call_open_] = call;
        if (channel_open_ >= 0) logits[channel_open_] = think;
        break;
      }
      case State::kThought:
        for (int32_t end : ends_) logits[end] = none;  // a thought cannot end the answer
        if (call_open_ >= 0) logits[call_open_] = none;
        break;
      case State::kForced: {
        const float keep = logits[forced_[forced_at_]];
        std::fill(logits, logits + n_vocab_, none);
        logits[forced_[forced_at_]] = keep;
        break;
      }
      case State::kFree: break;
    }
  }

  Status Accept(int32_t token) override {
    switch (state_) {
      case State::kBeforeCall:
        if (token == channel_open_) {
          state_ = State::kThought;
        } else if (token == call_open_) {
          state_ = forced_.empty() ? State::kFree : State::kForced;
        } else {
          return Status::Error("token " + std::to_string(token) + " before the required tool call");
        }
        break;
      case State::kThought:
        if (token == channel_close_) state_ = State::kBeforeCall;
        break;
      case State::kForced:
        if (token != forced_[forced_at_]) return Status::Error("token " + std::to_string(token) + " in the forced call opening");
        if (++forced_at_ == forced_.size()) state_ = State::kFree;
        break;
      case State::kFree: break;
    }
    return Status::Ok();
  }

 private:
  enum class State { kBeforeCall, kThought, kForced, kFree };
  const int n_vocab_;
  const int32_t channel_open_, channel_close_, call_open_;
  const std::vector<int32_t> forced_;  // "call:NAME{" for a named function
  const std::vector<int32_t> ends_;
  State state_ = State::kBeforeCall;
  size_t forced_at_ = 0;
};

// tool_choice "none": never <|tool_call>.
class ForbidToken final : public TokenConstraint {
 public:
  explicit ForbidToken(int32_t token) : token_(token) {}
  void Mask(float* logits, int remaining_tokens) override {
    (void)remaining_tokens;
    logits[token_] = -std::numeric_limits<float>::infinity();
  }
  Status Accept(int32_t token) override {
    return token == token_ ? Status::Error("a tool call under tool_choice \"none\"") : Status::Ok();
  }

 private:
  const int32_t token_;
};

}  // namespace

Result<std::unique_ptr<TokenConstraint>> ToolChoiceConstraint(const ToolChoice& choice, const Engine& engine) {
  if (choice.mode == ToolChoice::kAuto) return std::unique_ptr<TokenConstraint>();
  const Tokenizer& tok = engine.tokenizer();
  const int32_t call_open = tok.vocab().Find("<|tool_call>");
  if (choice.mode == ToolChoice::kNone) {
    // The prompt declares no tools; a model that calls one anyway (from the history) may not.
    if (call_open < 0) return std::unique_ptr<TokenConstraint>();
    return std::unique_ptr<TokenConstraint>(std::make_unique<ForbidToken>(call_open));
  }
  if (call_open < 0) {
    return Status::Error(StatusCode::kInvalidArgument, "tool_choice: this model's vocabulary has no <|tool_call> token");
  }
  std::vector<int32_t> forced;
  if (choice.mode == ToolChoice::kFunction) {
    EncodeOptions plain;
    plain.parse_special = false;
    forced = tok.Encode("call:" + choice.function + "{", plain);
  }
  return std::unique_ptr<TokenConstraint>(std::make_unique<ToolChoiceMask>(
      engine.config().n_vocab, tok.vocab().Find("<|channel>"), tok.vocab().Find("<channel|>"), call_open, std::move(forced),
      engine.end_of_generation()));
}

}  // namespace gemlet::runtime

