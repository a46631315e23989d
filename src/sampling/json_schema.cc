// SchemaCompiler: one rule per schema node, shared rules for whitespace, numbers and "any value", one
// rule per $ref target so that recursive schemas become recursive rules.
#include "sampling/json_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_input.h"

namespace gemlet {
namespace {

// Ordered, so that properties keep the schema's order.
using Json = nlohmann::ordered_json;
using Seq = GrammarBuilder::Sequence;

constexpr int kMaxIntegerDigits = 15;   // every such integer is exact in a double (and in JavaScript)
constexpr int kMaxFractionDigits = 15;
constexpr int kMaxExponentDigits = 2;   // 1e99 at most: no overflow to infinity
constexpr int kMaxDepth = 200;          // schema nesting
constexpr uint64_t kMaxCountedItems = 10000;  // maxItems / minItems unrolled into rules
constexpr int kMaxRules = 200000;

// Keywords that change which values are valid and that this compiler does not implement.
const std::set<std::string>& RefusedKeywords() {
  static const std::set<std::string> k = {
      "pattern",          "patternProperties", "propertyNames",   "minProperties", "maxProperties",
      "dependentRequired", "dependentSchemas", "dependencies",    "not",           "if",
      "then",             "else",              "uniqueItems",     "contains",      "minContains",
      "maxContains",      "prefixItems",       "additionalItems", "unevaluatedItems",
      "unevaluatedProperties", "multipleOf",   "$dynamicRef",     "$dynamicAnchor", "$recursiveRef",
      "$recursiveAnchor",
  };
  return k;
}

// The keywords this compiler implements; combining some of them is refused below.
const std::set<std::string>& ValidationKeywords() {
  static const std::set<std::string> k = {
      "type",  "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
      "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum",
  };
  return k;
}

enum TypeBit : unsigned {
  kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32, kNull = 64,
  kAllTypes = 127,
};

std::optional<unsigned> TypeFromName(const std::string& name) {
  static const std::map<std::string, unsigned> k = {
      {"object", kObject}, {"array", kArray},     {"string", kString}, {"number", kNumber},
      {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull},
  };
  auto it = k.find(name);
  if (it == k.end()) return std::nullopt;
  return it->second;
}

uint64_t CodePoints(const std::string& s) {
  uint64_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

bool IsIntegral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == static_cast<double>(static_cast<long long>(d));
}

// "~1" -> "/", "~0" -> "~", "%XX" -> byte, in one reference token of a JSON pointer fragment.
std::string UnescapePointerToken(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else if (token[i] == '%' && i + 2 < token.size() && std::isxdigit(static_cast<unsigned char>(token[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(token[i + 2]))) {
      out += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += token[i];
    }
  }
  return out;
}

constexpr int64_t kMaxMagnitude = 999999999999999;  // kMaxIntegerDigits nines

// The decimal numbers u..v (0 <= u <= v, no leading zeros) as sequences of byte sets, one per digit:
// each digit count on its own, then the classic split of an equal-length range [x, y] into a common
// digit, a middle run with free tails, and the two edges.
void EqualLengthRanges(const std::string& x, const std::string& y, std::vector<ByteSet>* prefix,
                       std::vector<std::vector<ByteSet>>* out) {
  auto digits = [](char lo, char hi) {
    ByteSet s;
    s.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
    return s;
  };
  const size_t n = x.size();
  if (n == 0) {
    out->push_back(*prefix);
    return;
  }
  const std::string x_rest = x.substr(1), y_rest = y.substr(1);
  const bool x_floor = x_rest.find_first_not_of('0') == std::string::npos;  // x = d000
  const bool y_ceil = y_rest.find_first_not_of('9') == std::string::npos;   // y = d999
  auto with_free_tail = [&](char lo, char hi) {
    std::vector<ByteSet> seq = *prefix;
    seq.push_back(digits(lo, hi));
    for (size_t i = 1; i < n; ++i) seq.push_back(digits('0', '9'));
    out->push_back(std::move(seq));
  };
  auto edge = [&](char d, const std::string& lo, const std::string& hi) {
    prefix->push_back(digits(d, d));
    EqualLengthRanges(lo, hi, prefix, out);
    prefix->pop_back();
  };
  if (x[0] == y[0]) {
    edge(x[0], x_rest, y_rest);
    return;
  }
  const char lo_free = x_floor ? x[0] : static_cast<char>(x[0] + 1);
  const char hi_free = y_ceil ? y[0] : static_cast<char>(y[0] - 1);
  if (!x_floor) edge(x[0], x_rest, std::string(n - 1, '9'));
  if (lo_free <= hi_free) with_free_tail(lo_free, hi_free);
  if (!y_ceil) edge(y[0], std::string(n - 1, '0'), y_rest);
}

std::vector<std::vector<ByteSet>> DecimalRange(int64_t u, int64_t v) {
  std::vector<std::vector<ByteSet>> out;
  for (int64_t low = u; low <= v;) {
    const std::string lo = std::to_string(low);
    int64_t top = 9;  // largest number with lo's digit count
    for (size_t i = 1; i < lo.size(); ++i) top = top * 10 + 9;
    const int64_t high = std::min(v, top);
    std::vector<ByteSet> prefix;
    EqualLengthRanges(lo, std::to_string(high), &prefix, &out);
    low = high + 1;
  }
  return out;
}

// A numeric bound: minimum/maximum with exclusiveMinimum/exclusiveMaximum (a number since draft 6,
// a boolean modifying minimum/maximum in draft 4). The tighter one wins.
struct Bound {
  bool present = false;
  double value = 0;
  bool exclusive = false;
};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonGrammarOptions& options) : root_(root), options_(options) {}

  Result<int> Value(const Json& schema, const std::string& path);
  Result<Grammar> Finish(int root_rule) && {
    auto g = std::move(b_).Build(root_rule);
    if (!g.ok()) {
      return Status::Error(StatusCode::kInvalidArgument, "JSON schema: " + g.message());
    }
    return g;
  }
  int AnyObject();

 private:
  Status Error(const std::string& path, const std::string& what) const {
    return Status::Error("JSON schema at " + path + ": " + what);
  }
  int NewRule(const std::string& name) { return b_.AddRule(name); }
  void Alt(int rule, Seq seq) { b_.AddAlternative(rule, std::move(seq)); }
  int Ws();
  int Any();
  int Integer();
  int Number();
  Result<int> BoundedNumber(const Json& schema, bool integer, const std::string& path);
  Result<std::pair<Bound, Bound>> Bounds(const Json& schema, const std::string& path) const;
  int Fraction();
  int Digits(int n);  // up to n more digits
  int Literal(const std::string& bytes, const std::string& name);
  int StringRule(uint32_t min_chars, uint32_t max_chars);
  Result<int> Ref(const std::string& ref, const std::string& path);
  Result<int> Enum(const Json& schema, const Json& values, const std::string& path);
  int LiteralSet(std::vector<std::string> texts);
  Result<int> Typed(const Json& schema, unsigned types, const std::string& path);
  Result<int> Object(const Json& schema, const std::string& path);
  Result<int> Array(const Json& schema, const std::string& path);
  Result<int> String(const Json& schema, const std::string& path);
  Result<uint64_t> Count(const Json& schema, const char* key, uint64_t fallback, const std::string& path) const;
  Result<unsigned> Types(const Json& schema, const std::string& path) const;
  struct Property {
    std::string name;
    int value;
    bool required;
  };
  int BuildObject(const std::vector<Property>& listed, int extra_value, const std::string& name);
  int BuildArray(int item, uint64_t min_items, uint64_t max_items, const std::string& name);

  const Json& root_;
  JsonGrammarOptions options_;
  GrammarBuilder b_;
  std::map<std::string, int> refs_;
  std::map<int, int> digits_;
  int ws_ = -1, any_ = -1, any_object_ = -1, integer_ = -1, number_ = -1, string_ = -1, fraction_ = -1;
  int depth_ = 0;
};

int SchemaCompiler::Ws() {
  if (ws_ >= 0) return ws_;
  ws_ = NewRule("ws");
  Alt(ws_, Seq());
  if (options_.whitespace) {
    Alt(ws_, Seq().Literal(" "));
    // "\n" and up to max_indent spaces: indent_k ::= "" | " " indent_{k-1}.
    int indent = NewRule("indent0");
    Alt(indent, Seq());
    for (int k = 1; k <= options_.max_indent; ++k) {
      const int next = NewRule("indent" + std::to_string(k));
      Alt(next, Seq());
      Alt(next, Seq().Literal(" ").Ref(indent));
      indent = next;
    }
    Alt(ws_, Seq().Literal("\n").Ref(indent));
  }
  return ws_;
}

int SchemaCompiler::Digits(int n) {
  auto it = digits_.find(n);
  if (it != digits_.end()) return it->second;
  const int r = NewRule("digits" + std::to_string(n));
  digits_[n] = r;
  Alt(r, Seq());
  if (n > 0) {
    ByteSet digit;
    digit.AddRange('0', '9');
    Alt(r, Seq().Bytes(digit).Ref(Digits(n - 1)));
  }
  return r;
}

int SchemaCompiler::Integer() {
  if (integer_ >= 0) return integer_;
  ByteSet nonzero;
  nonzero.AddRange('1', '9');
  const int uint = NewRule("uint");
  Alt(uint, Seq().Literal("0"));
  Alt(uint, Seq().Bytes(nonzero).Ref(Digits(kMaxIntegerDigits - 1)));
  integer_ = NewRule("integer");
  Alt(integer_, Seq().Ref(uint));
  Alt(integer_, Seq().Literal("-").Ref(uint));
  return integer_;
}

int SchemaCompiler::Number() {
  if (number_ >= 0) return number_;
  ByteSet digit, e, sign;
  digit.AddRange('0', '9');
  e.Add('e');
  e.Add('E');
  sign.Add('+');
  sign.Add('-');
  const int frac = NewRule("fraction-opt");
  Alt(frac, Seq());
  Alt(frac, Seq().Ref(Fraction()));
  const int exp_sign = NewRule("exponent-sign");
  Alt(exp_sign, Seq());
  Alt(exp_sign, Seq().Bytes(sign));
  const int exp = NewRule("exponent");
  Alt(exp, Seq());
  Alt(exp, Seq().Bytes(e).Ref(exp_sign).Bytes(digit).Ref(Digits(kMaxExponentDigits - 1)));
  number_ = NewRule("number");
  Alt(number_, Seq().Ref(Integer()).Ref(frac).Ref(exp));
  return number_;
}

int SchemaCompiler::Fraction() {
  if (fraction_ >= 0) return fraction_;
  ByteSet digit;
  digit.AddRange('0', '9');
  fraction_ = NewRule("fraction");
  Alt(fraction_, Seq().Literal(".").Bytes(digit).Ref(Digits(kMaxFractionDigits - 1)));
  return fraction_;
}

Result<std::pair<Bound, Bound>> SchemaCompiler::Bounds(const Json& schema, const std::string& path) const {
  Bound lo, hi;
  auto number = [&](const char* key, double* out) -> Status {
    auto it = schema.find(key);
    if (it == schema.end()) return Status::Ok();
    if (!it->is_number()) return Error(path, std::string("'") + key + "' must be a number");
    *out = it->get<double>();
    return Status::Ok();
  };
  auto tighten = [](Bound* b, double v, bool exclusive, bool lower) {
    const bool tighter = !b->present || (lower ? v > b->value : v < b->value) || (v == b->value && exclusive);
    if (tighter) *b = Bound{true, v, exclusive};
  };
  double v = 0;
  if (schema.contains("minimum")) {
    RETURN_IF_ERROR(number("minimum", &v));
    const auto ex = schema.find("exclusiveMinimum");
    tighten(&lo, v, ex != schema.end() && ex->is_boolean() && ex->get<bool>(), true);
  }
  if (schema.contains("maximum")) {
    RETURN_IF_ERROR(number("maximum", &v));
    const auto ex = schema.find("exclusiveMaximum");
    tighten(&hi, v, ex != schema.end() && ex->is_boolean() && ex->get<bool>(), false);
  }
  for (const auto& [key, lower] : {std::pair{"exclusiveMinimum", true}, {"exclusiveMaximum", false}}) {
    auto it = schema.find(key);
    if (it == schema.end() || it->is_boolean()) continue;
    RETURN_IF_ERROR(number(key, &v));
    tighten(lower ? &lo : &hi, v, true, lower);
  }
  return std::pair{lo, hi};
}

// Integers in the bounds exactly. Numbers: a subset that is sound and easy to write as a grammar:
// integer parts that keep the value in range, with a fraction only where the whole unit interval
// after the integer part is in range (so 4.5 under maximum 5, but no 5.0x), and no exponent.
Result<int> SchemaCompiler::BoundedNumber(const Json& schema, bool integer, const std::string& path) {
  ASSIGN_OR_RETURN(const auto bounds, Bounds(schema, path));
  const auto [lo, hi] = bounds;
  const double kMax = static_cast<double>(kMaxMagnitude);
  // Smallest integer above a lower bound and largest below an upper bound, clamped to 15 digits.
  auto ceil_of = [&](const Bound& b) {
    if (!b.present) return -kMax;
    const double c = b.exclusive ? std::floor(b.value) + 1 : std::ceil(b.value);
    return std::clamp(c, -kMax - 1, kMax + 1);
  };
  auto floor_of = [&](const Bound& b) {
    if (!b.present) return kMax;
    const double f = b.exclusive ? std::ceil(b.value) - 1 : std::floor(b.value);
    return std::clamp(f, -kMax - 1, kMax + 1);
  };
  const int64_t min_int = static_cast<int64_t>(std::max(ceil_of(lo), -kMax));
  const int64_t max_int = static_cast<int64_t>(std::min(floor_of(hi), kMax));
  const int r = NewRule(integer ? "integer-range" : "number-range");
  int alternatives = 0;
  auto add = [&](bool negative, int64_t from, int64_t to, bool fraction) {
    if (from > to) return;
    for (const std::vector<ByteSet>& digits : DecimalRange(from, to)) {
      Seq seq;
      if (negative) seq.Literal("-");
      for (const ByteSet& d : digits) seq.Bytes(d);
      if (fraction) seq.Ref(Fraction());
      Alt(r, std::move(seq));
      ++alternatives;
    }
  };
  // Plain integers: non-negative, then negative by magnitude (never "-0").
  add(false, std::max<int64_t>(min_int, 0), max_int, false);
  add(true, std::max<int64_t>(-max_int, 1), -min_int, false);
  if (!integer) {
    // I.f lies in [I, I+1): I must meet the lower bound and I+1 the upper one.
    const int64_t hi_floor = hi.present ? static_cast<int64_t>(std::clamp(std::floor(hi.value), -kMax - 1, kMax + 1))
                                        : kMaxMagnitude + 1;
    add(false, std::max<int64_t>(min_int, 0), std::min<int64_t>(hi_floor - 1, kMaxMagnitude), true);
    // -I.f lies in (-(I+1), -I]: -(I+1) must meet the lower bound, -I the upper one.
    const int64_t lo_ceil = lo.present ? static_cast<int64_t>(std::clamp(std::ceil(lo.value), -kMax - 1, kMax + 1))
                                       : -kMaxMagnitude - 1;
    add(true, std::max<int64_t>(-max_int, 0), std::min<int64_t>(-lo_ceil - 1, kMaxMagnitude), true);
  }
  if (alternatives == 0) {
    return Error(path, integer ? "no integer of at most 15 digits lies between minimum and maximum"
                               : "the bounds leave no number this compiler can write (it needs a whole unit "
                                 "interval or an integer between minimum and maximum)");
  }
  return r;
}

int SchemaCompiler::Literal(const std::string& bytes, const std::string& name) {
  const int r = NewRule(name);
  Alt(r, Seq().Literal(bytes));
  return r;
}

int SchemaCompiler::StringRule(uint32_t min_chars, uint32_t max_chars) {
  const bool plain = min_chars == 0 && max_chars == Grammar::kInfinite;
  if (plain && string_ >= 0) return string_;
  const int r = NewRule("string");
  Alt(r, Seq().Literal("\"").String(StringSpec{min_chars, max_chars, {}}));
  if (plain) string_ = r;
  return r;
}

int SchemaCompiler::Any() {
  if (any_ >= 0) return any_;
  any_ = NewRule("value");
  Alt(any_, Seq().Ref(AnyObject()));
  Alt(any_, Seq().Ref(BuildArray(any_, 0, std::numeric_limits<uint64_t>::max(), "array")));
  Alt(any_, Seq().Ref(StringRule(0, Grammar::kInfinite)));
  Alt(any_, Seq().Ref(Number()));
  Alt(any_, Seq().Literal("true"));
  Alt(any_, Seq().Literal("false"));
  Alt(any_, Seq().Literal("null"));
  return any_;
}

int SchemaCompiler::AnyObject() {
  if (any_object_ >= 0) return any_object_;
  // Reserve the name first: Any() refers back to it.
  any_object_ = NewRule("object");
  const int body = BuildObject({}, Any(), "object-any");
  Alt(any_object_, Seq().Ref(body));
  return any_object_;
}

// '{' ws first_0, where first_i means "no property yet, at property i" and rest_i "some property
// already written, at property i"; after the listed properties come the extra ones, if allowed.
// Whitespace is consumed before each first_/rest_, so no two ws rules ever meet.
int SchemaCompiler::BuildObject(const std::vector<Property>& listed, int extra_value, const std::string& name) {
  const int ws = Ws();
  std::vector<std::string> keys;
  for (const Property& p : listed) keys.push_back(Json(p.name).dump());

  int first_next = NewRule(name + "-end");
  int rest_next = first_next;
  if (extra_value < 0) {
    Alt(first_next, Seq().Literal("}"));
  } else {
    std::vector<std::string> excluded;
    for (const Property& p : listed) excluded.push_back(p.name);
    auto entry = [&](Seq seq) {
      return std::move(seq.Literal("\"").String(StringSpec{0, Grammar::kInfinite, excluded}).Ref(ws).Literal(":")
                           .Ref(ws).Ref(extra_value));
    };
    rest_next = NewRule(name + "-extra-rest");
    Alt(rest_next, Seq().Literal("}"));
    Alt(rest_next, entry(Seq().Literal(",").Ref(ws)).Ref(ws).Ref(rest_next));
    Alt(first_next, Seq().Literal("}"));
    Alt(first_next, entry(Seq()).Ref(ws).Ref(rest_next));
  }
  for (size_t i = listed.size(); i-- > 0;) {
    const Property& p = listed[i];
    const std::string tag = name + "-" + std::to_string(i);
    const int first = NewRule(tag + "-first");
    const int rest = NewRule(tag + "-rest");
    auto member = [&](Seq seq) { return std::move(seq.Literal(keys[i]).Ref(ws).Literal(":").Ref(ws).Ref(p.value)); };
    Alt(first, member(Seq()).Ref(ws).Ref(rest_next));
    Alt(rest, member(Seq().Literal(",").Ref(ws)).Ref(ws).Ref(rest_next));
    if (!p.required) {
      Alt(first, Seq().Ref(first_next));
      Alt(rest, Seq().Ref(rest_next));
    }
    first_next = first;
    rest_next = rest;
  }
  const int object = NewRule(name);
  Alt(object, Seq().Literal("{").Ref(ws).Ref(first_next));
  return object;
}

// '[' ws then, after k items, tail_k: ']' once k >= min, ", item" while k < max; an unbounded max
// loops on the last tail.
int SchemaCompiler::BuildArray(int item, uint64_t min_items, uint64_t max_items, const std::string& name) {
  const int ws = Ws();
  const int array = NewRule(name);
  const bool unbounded = max_items == std::numeric_limits<uint64_t>::max();
  if (max_items == 0) {
    Alt(array, Seq().Literal("[").Ref(ws).Literal("]"));
    return array;
  }
  const uint64_t tails = unbounded ? std::max<uint64_t>(min_items, 1) : max_items;
  std::vector<int> tail(tails + 1, -1);
  for (uint64_t k = 1; k <= tails; ++k) tail[k] = NewRule(name + "-after" + std::to_string(k));
  for (uint64_t k = 1; k <= tails; ++k) {
    if (k >= min_items) Alt(tail[k], Seq().Literal("]"));
    if (k < tails) {
      Alt(tail[k], Seq().Literal(",").Ref(ws).Ref(item).Ref(ws).Ref(tail[k + 1]));
    } else if (unbounded) {
      Alt(tail[k], Seq().Literal(",").Ref(ws).Ref(item).Ref(ws).Ref(tail[k]));
    }
  }
  if (min_items == 0) Alt(array, Seq().Literal("[").Ref(ws).Literal("]"));
  Alt(array, Seq().Literal("[").Ref(ws).Ref(item).Ref(ws).Ref(tail[1]));
  return array;
}

Result<uint64_t> SchemaCompiler::Count(const Json& schema, const char* key, uint64_t fallback,
                                       const std::string& path) const {
  auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  if (!IsIntegral(*it) || it->get<double>() < 0) {
    return Error(path, std::string("'") + key + "' must be a non-negative integer");
  }
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<double>());
}

Result<unsigned> SchemaCompiler::Types(const Json& schema, const std::string& path) const {
  auto it = schema.find("type");
  if (it == schema.end()) {
    unsigned implied = 0;
    if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties")) {
      implied |= kObject;
    }
    if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) implied |= kArray;
    if (schema.contains("minLength") || schema.contains("maxLength")) implied |= kString;
    if (schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
        schema.contains("exclusiveMaximum")) {
      implied |= kNumber;
    }
    return implied ? implied : unsigned{kAllTypes};
  }
  std::vector<Json> names;
  if (it->is_string()) {
    names.push_back(*it);
  } else if (it->is_array() && !it->empty()) {
    names.assign(it->begin(), it->end());
  } else {
    return Error(path, "'type' must be a type name or a non-empty list of them");
  }
  unsigned types = 0;
  for (const Json& n : names) {
    const auto t = n.is_string() ? TypeFromName(n.get<std::string>()) : std::nullopt;
    if (!t) return Error(path, "unknown type " + n.dump());
    types |= *t;
  }
  return types;
}

Result<int> SchemaCompiler::Ref(const std::string& ref, const std::string& path) {
  auto it = refs_.find(ref);
  if (it != refs_.end()) return it->second;
  if (ref.empty() || ref[0] != '#' || (ref.size() > 1 && ref[1] != '/')) {
    return Error(path, "$ref \"" + ref + "\" is not supported: only local references (\"#/...\") are");
  }
  const Json* target = &root_;
  for (size_t start = 2; ref.size() > 1 && start <= ref.size();) {
    size_t end = ref.find('/', start);
    if (end == std::string::npos) end = ref.size();
    const std::string token = UnescapePointerToken(ref.substr(start, end - start));
    if (target->is_object() && target->contains(token)) {
      target = &(*target)[token];
    } else if (target->is_array() && !token.empty() &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               token.size() < 10 && std::stoul(token) < target->size()) {
      target = &(*target)[std::stoul(token)];
    } else {
      return Error(path, "$ref \"" + ref + "\" points to nothing");
    }
    start = end + 1;
  }
  // The rule exists before its body is compiled, so a recursive reference finds it.
  const int rule = NewRule("ref:" + ref);
  refs_[ref] = rule;
  ASSIGN_OR_RETURN(const int body, Value(*target, ref));
  Alt(rule, Seq().Ref(body));
  return rule;
}

Result<int> SchemaCompiler::Enum(const Json& schema, const Json& values, const std::string& path) {
  for (const char* k : {"properties", "required", "additionalProperties", "items", "anyOf", "oneOf", "allOf"}) {
    if (schema.contains(k)) return Error(path, std::string("'enum'/'const' together with '") + k + "' is not supported");
  }
  ASSIGN_OR_RETURN(const unsigned types, Types(schema, path));
  ASSIGN_OR_RETURN(const uint64_t min_len, Count(schema, "minLength", 0, path));
  ASSIGN_OR_RETURN(const uint64_t max_len, Count(schema, "maxLength", std::numeric_limits<uint64_t>::max(), path));
  ASSIGN_OR_RETURN(const uint64_t min_items, Count(schema, "minItems", 0, path));
  ASSIGN_OR_RETURN(const uint64_t max_items, Count(schema, "maxItems", std::numeric_limits<uint64_t>::max(), path));
  ASSIGN_OR_RETURN(const auto bounds, Bounds(schema, path));
  auto in_bounds = [&](double x) {
    const auto& [lo, hi] = bounds;
    if (lo.present && (lo.exclusive ? x <= lo.value : x < lo.value)) return false;
    if (hi.present && (hi.exclusive ? x >= hi.value : x > hi.value)) return false;
    return true;
  };
  std::vector<std::string> texts;
  for (const Json& v : values) {
    unsigned t = 0;
    if (v.is_object()) t = kObject;
    if (v.is_array()) t = kArray;
    if (v.is_string()) t = kString;
    if (v.is_number()) t = IsIntegral(v) ? (kNumber | kInteger) : kNumber;
    if (v.is_boolean()) t = kBoolean;
    if (v.is_null()) t = kNull;
    if (!(t & types)) continue;
    if (v.is_string()) {
      const uint64_t n = CodePoints(v.get<std::string>());
      if (n < min_len || n > max_len) continue;
    }
    if (v.is_array() && (v.size() < min_items || v.size() > max_items)) continue;
    if (v.is_number() && !in_bounds(v.get<double>())) continue;
    try {
      texts.push_back(v.dump());
    } catch (const nlohmann::json::exception& e) {
      return Error(path, std::string("enum value cannot be written: ") + e.what());
    }
  }
  const size_t kept = texts.size();
  if (kept == 0) return Error(path, "no value of 'enum'/'const' satisfies the rest of the schema");
  return LiteralSet(std::move(texts));
}

// Literals sharing prefixes, as one rule per branching point of their byte trie, so that a parse
// stays one configuration (a thousand-value enum would otherwise start as a thousand).
int SchemaCompiler::LiteralSet(std::vector<std::string> texts) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // Rule for the texts in [begin, end), which all share their first `depth` bytes.
  auto build = [&](auto&& self, size_t begin, size_t end, size_t depth) -> int {
    const int rule = NewRule("literals");
    size_t i = begin;
    if (texts[i].size() == depth) {
      Alt(rule, Seq());  // one text ends here (sorted first)
      ++i;
    }
    while (i < end) {
      // The texts with the same next byte, and how far they all agree.
      size_t j = i + 1;
      while (j < end && texts[j][depth] == texts[i][depth]) ++j;
      size_t common = depth + 1;
      while (common < texts[i].size() && std::all_of(texts.begin() + i + 1, texts.begin() + j, [&](const std::string& t) {
               return common < t.size() && t[common] == texts[i][common];
             })) {
        ++common;
      }
      Seq seq;
      seq.Literal(std::string_view(texts[i]).substr(depth, common - depth));
      if (j - i > 1 || texts[i].size() > common) seq.Ref(self(self, i, j, common));
      Alt(rule, std::move(seq));
      i = j;
    }
    return rule;
  };
  return build(build, 0, texts.size(), 0);
}

Result<int> SchemaCompiler::Object(const Json& schema, const std::string& path) {
  std::vector<Property> listed;
  std::vector<std::string> required_order;
  std::set<std::string> required;
  if (auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array()) return Error(path, "'required' must be a list of property names");
    for (const Json& r : *it) {
      if (!r.is_string()) return Error(path, "'required' must be a list of property names");
      if (required.insert(r.get<std::string>()).second) required_order.push_back(r.get<std::string>());
    }
  }
  const auto props = schema.find("properties");
  if (props != schema.end() && !props->is_object()) return Error(path, "'properties' must be an object");
  // Extra properties: the additionalProperties schema, or none (-1).
  int extra = -1;
  auto ap = schema.find("additionalProperties");
  if (ap == schema.end()) {
    if (props == schema.end()) extra = Any();
  } else if (ap->is_boolean()) {
    if (ap->get<bool>()) extra = Any();
  } else if (ap->is_object()) {
    ASSIGN_OR_RETURN(extra, Value(*ap, path + "/additionalProperties"));
  } else {
    return Error(path, "'additionalProperties' must be a boolean or a schema");
  }
  std::set<std::string> seen;
  if (props != schema.end()) {
    for (auto it = props->begin(); it != props->end(); ++it) {
      const std::string& name = it.key();
      seen.insert(name);
      const bool req = required.count(name) > 0;
      if (it->is_boolean() && !it->get<bool>()) {
        if (req) return Error(path, "required property '" + name + "' has the schema false");
        continue;  // a property that may not appear is simply never written
      }
      ASSIGN_OR_RETURN(const int value, Value(*it, path + "/properties/" + name));
      listed.push_back(Property{name, value, req});
    }
  }
  // Required names without a schema of their own take additionalProperties' schema.
  for (const std::string& name : required_order) {
    if (seen.count(name)) continue;
    if (extra < 0) {
      return Error(path, "required property '" + name + "' is not in 'properties' and additionalProperties is false");
    }
    seen.insert(name);
    listed.push_back(Property{name, extra, true});
  }
  return BuildObject(listed, extra, "object");
}

Result<int> SchemaCompiler::Array(const Json& schema, const std::string& path) {
  ASSIGN_OR_RETURN(const uint64_t min_items, Count(schema, "minItems", 0, path));
  ASSIGN_OR_RETURN(uint64_t max_items, Count(schema, "maxItems", std::numeric_limits<uint64_t>::max(), path));
  if (min_items > max_items) return Error(path, "minItems is above maxItems");
  const bool unbounded = max_items == std::numeric_limits<uint64_t>::max();
  if (min_items > kMaxCountedItems || (!unbounded && max_items > kMaxCountedItems)) {
    return Error(path, "minItems/maxItems above " + std::to_string(kMaxCountedItems) + " are not supported");
  }
  int item = -1;
  auto it = schema.find("items");
  if (it == schema.end() || (it->is_boolean() && it->get<bool>())) {
    item = Any();
  } else if (it->is_boolean()) {
    if (min_items > 0) return Error(path, "'items' is false but minItems is above 0");
    max_items = 0;
    item = Any();  // never used
  } else if (it->is_object()) {
    ASSIGN_OR_RETURN(item, Value(*it, path + "/items"));
  } else {
    return Error(path, "'items' as a list (tuple validation) is not supported");
  }
  return BuildArray(item, min_items, max_items, "array");
}

Result<int> SchemaCompiler::String(const Json& schema, const std::string& path) {
  ASSIGN_OR_RETURN(const uint64_t min_len, Count(schema, "minLength", 0, path));
  ASSIGN_OR_RETURN(const uint64_t max_len, Count(schema, "maxLength", Grammar::kInfinite, path));
  if (min_len > max_len) return Error(path, "minLength is above maxLength");
  if (min_len >= Grammar::kInfinite) return Error(path, "minLength is too large");
  return StringRule(static_cast<uint32_t>(min_len), static_cast<uint32_t>(std::min<uint64_t>(max_len, Grammar::kInfinite)));
}

Result<int> SchemaCompiler::Typed(const Json& schema, unsigned types, const std::string& path) {
  std::vector<int> alts;
  if (types & kObject) {
    ASSIGN_OR_RETURN(const int r, Object(schema, path));
    alts.push_back(r);
  }
  if (types & kArray) {
    ASSIGN_OR_RETURN(const int r, Array(schema, path));
    alts.push_back(r);
  }
  if (types & kString) {
    ASSIGN_OR_RETURN(const int r, String(schema, path));
    alts.push_back(r);
  }
  // A number covers every integer: offering both would only parse digits twice.
  const bool bounded = schema.contains("minimum") || schema.contains("maximum") ||
                       schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum");
  if (types & (kNumber | kInteger)) {
    if (bounded) {
      ASSIGN_OR_RETURN(const int r, BoundedNumber(schema, !(types & kNumber), path));
      alts.push_back(r);
    } else {
      alts.push_back((types & kNumber) ? Number() : Integer());
    }
  }
  if (types & kBoolean) {
    const int r = NewRule("boolean");
    Alt(r, Seq().Literal("true"));
    Alt(r, Seq().Literal("false"));
    alts.push_back(r);
  }
  if (types & kNull) alts.push_back(Literal("null", "null"));
  if (alts.size() == 1) return alts[0];
  const int r = NewRule("types");
  for (int a : alts) Alt(r, Seq().Ref(a));
  return r;
}

Result<int> SchemaCompiler::Value(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return Any();
    return Error(path, "the schema false admits no value");
  }
  if (!schema.is_object()) return Error(path, "a schema must be an object or a boolean");
  if (depth_ >= kMaxDepth) return Error(path, "the schema nests too deeply");
  if (b_.rule_count() > kMaxRules) return Error(path, "the schema is too large");
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& depth) : d(depth) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth_);

  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (RefusedKeywords().count(it.key())) return Error(path, "keyword '" + it.key() + "' is not supported");
  }
  // Keywords that stand alone here: siblings that also constrain the value would need an
  // intersection of grammars, which is refused rather than ignored.
  auto alone = [&](const char* key) -> Status {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (it.key() != key && ValidationKeywords().count(it.key())) {
        return Error(path, std::string("'").append(key).append("' together with '").append(it.key()).append("' is not supported"));
      }
    }
    return Status::Ok();
  };
  if (auto it = schema.find("$ref"); it != schema.end()) {
    RETURN_IF_ERROR(alone("$ref"));
    if (!it->is_string()) return Error(path, "'$ref' must be a string");
    return Ref(it->get<std::string>(), path);
  }
  if (auto it = schema.find("allOf"); it != schema.end()) {
    RETURN_IF_ERROR(alone("allOf"));
    if (!it->is_array() || it->size() != 1) return Error(path, "'allOf' with more than one schema is not supported");
    return Value((*it)[0], path + "/allOf/0");
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    RETURN_IF_ERROR(alone(key));
    if (!it->is_array() || it->empty()) return Error(path, std::string("'") + key + "' must be a non-empty list");
    const int r = NewRule(key);
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string sub = path + "/" + key + "/" + std::to_string(i);
      const Json& branch = (*it)[i];
      if (branch.is_boolean() && !branch.get<bool>()) continue;  // a branch nothing satisfies
      ASSIGN_OR_RETURN(const int alt, Value(branch, sub));
      Alt(r, Seq().Ref(alt));
    }
    return r;
  }
  if (auto it = schema.find("const"); it != schema.end()) {
    if (schema.contains("enum")) return Error(path, "'const' together with 'enum' is not supported");
    return Enum(schema, Json::array({*it}), path);
  }
  if (auto it = schema.find("enum"); it != schema.end()) {
    if (!it->is_array() || it->empty()) return Error(path, "'enum' must be a non-empty list");
    return Enum(schema, *it, path);
  }
  ASSIGN_OR_RETURN(const unsigned types, Types(schema, path));
  return Typed(schema, types, path);
}

Result<Grammar> CompileParsed(const Json& schema, const JsonGrammarOptions& options) {
  SchemaCompiler compiler(schema, options);
  Result<int> root = Status::Error("unreached");
  try {
    root = compiler.Value(schema, "#");
  } catch (const nlohmann::json::exception& e) {
    // A value of an unexpected JSON type slipped past a check; report it rather than throw.
    return Status::Error(StatusCode::kInvalidArgument, std::string("JSON schema: ") + e.what());
  }
  if (!root.ok()) return Status::Error(StatusCode::kInvalidArgument, root.message());
  return std::move(compiler).Finish(*root);
}

}  // namespace

Result<Grammar> CompileJsonSchema(std::string_view schema_json, const JsonGrammarOptions& options) {
  Result<Json> schema = ParseJson<Json>(schema_json, "the JSON schema");
  if (!schema.ok()) return Status::Error(StatusCode::kInvalidArgument, schema.message());
  return CompileParsed(*schema, options);
}

Grammar JsonObjectGrammar(const JsonGrammarOptions& options) {
  const Json empty = Json::object();
  SchemaCompiler compiler(empty, options);
  const int root = compiler.AnyObject();
  auto g = std::move(compiler).Finish(root);
  return std::move(g).value();  // a fixed grammar: it always builds
}

Result<std::shared_ptr<const Grammar>> GrammarForResponseFormat(std::string_view response_format_json,
                                                                const JsonGrammarOptions& options) {
  Result<Json> parsed = ParseJson<Json>(response_format_json, "response_format");
  if (!parsed.ok()) return Status::Error(StatusCode::kInvalidArgument, parsed.message());
  const Json format = std::move(parsed).value();
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return Status::Error(StatusCode::kInvalidArgument, "response_format needs a \"type\"");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return std::shared_ptr<const Grammar>();
  if (type == "json_object") return std::make_shared<const Grammar>(JsonObjectGrammar(options));
  if (type != "json_schema") {
    return Status::Error(StatusCode::kInvalidArgument, "response_format type \"" + type + "\" is not supported");
  }
  auto js = format.find("json_schema");
  if (js == format.end() || !js->is_object() || !js->contains("schema")) {
    return Status::Error(StatusCode::kInvalidArgument, "response_format json_schema needs a \"schema\"");
  }
  ASSIGN_OR_RETURN(Grammar g, CompileParsed((*js)["schema"], options));
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace gemlet
