// tools::Inspect: a GGUF file's header, metadata, tensor table and totals, as text or JSON.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "gemlet/tools.hpp"
#include "gguf/gguf_reader.h"

namespace gemlet::tools {
namespace {

// Arrays longer than this are abbreviated in both outputs (token tables have 256k entries).
constexpr size_t kTextArrayElems = 8;
constexpr size_t kJsonArrayElems = 64;

std::string TypeLabel(const GgufValue& v) {
  if (v.type != GgufType::kArray) return GgufTypeName(v.type);
  return std::string("arr[") + GgufTypeName(v.elem_type) + "," + std::to_string(v.count) + "]";
}

std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(n);
  int u = 0;
  while (x >= 1024 && u < 4) { x /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", x, units[u]);
  return buf;
}

// The shortest decimal that reads back as the same float, so 1e-6f prints as 1e-06, not 9.99999997e-07.
double ShortestFloat(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

nlohmann::json ElementJson(const GgufValue& v, uint64_t i);

nlohmann::json ValueJson(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kBool: return v.u64 != 0;
    case GgufType::kString: return std::string(v.str);
    case GgufType::kFloat32: return ShortestFloat(static_cast<float>(v.f64));
    case GgufType::kFloat64: return v.f64;
    case GgufType::kUint8: case GgufType::kUint16: case GgufType::kUint32: case GgufType::kUint64: return v.u64;
    case GgufType::kArray: break;
    default: return v.i64;
  }
  const uint64_t n = std::min<uint64_t>(v.count, kJsonArrayElems);
  nlohmann::json elems = nlohmann::json::array();
  for (uint64_t i = 0; i < n; ++i) elems.push_back(ElementJson(v, i));
  if (v.count <= kJsonArrayElems) return elems;
  return {{"array_of", GgufTypeName(v.elem_type)}, {"count", v.count}, {"first", elems}};
}

nlohmann::json ElementJson(const GgufValue& v, uint64_t i) {
  switch (v.elem_type) {
    case GgufType::kString: return std::string(v.strings[i]);
    case GgufType::kArray: return ValueJson(v.arrays[i]);
    case GgufType::kBool: return v.raw[i] != 0;
    case GgufType::kFloat32: return ShortestFloat(static_cast<float>(v.FloatAt(i)));
    case GgufType::kFloat64: return v.FloatAt(i);
    case GgufType::kUint64: return static_cast<uint64_t>(v.IntAt(i));
    default: return v.IntAt(i);
  }
}

// printf onto the end of a string.
__attribute__((format(printf, 2, 3))) void Append(std::string& out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, format, again);
    out.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

struct TypeTotal {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

struct Totals {
  std::map<std::string, TypeTotal> by_type;
  uint64_t bytes = 0;
  uint64_t parameters = 0;
};

Totals Summarize(const GgufFile& file) {
  Totals t;
  for (const GgufTensor& tensor : file.tensors()) {
    TypeTotal& tt = t.by_type[DTypeName(tensor.type)];
    ++tt.tensors;
    tt.bytes += tensor.nbytes;
    t.bytes += tensor.nbytes;
    t.parameters += static_cast<uint64_t>(tensor.n_elements());
  }
  return t;
}

void PrintText(std::string& out, const GgufFile& file, bool list_tensors) {
  Append(out, "%s: GGUF v%u, %s\n", file.path().c_str(), file.version(), HumanBytes(file.file_size()).c_str());
  Append(out, "alignment %u, data section at byte %zu\n", file.alignment(), file.data_offset());

  size_t key_width = 0;
  for (const auto& [key, value] : file.metadata()) key_width = std::max(key_width, key.size());
  key_width = std::min<size_t>(key_width, 48);
  Append(out, "\nmetadata: %zu keys\n", file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    // Keys come from the file: print them escaped like any other string from it.
    GgufValue key_value;
    key_value.type = GgufType::kString;
    key_value.str = key;
    std::string shown = key_value.ToString(120);
    shown = shown.substr(1, shown.size() - 2);
    Append(out, "  %-*s  %-14s %s\n", static_cast<int>(key_width), shown.c_str(), TypeLabel(value).c_str(),
                value.ToString(kTextArrayElems).c_str());
  }

  if (list_tensors) {
    size_t name_width = 4;
    for (const GgufTensor& t : file.tensors()) name_width = std::max(name_width, t.name.size());
    Append(out, "\ntensors: %zu\n", file.tensors().size());
    Append(out, "  %-*s  %-7s %-24s %14s %14s\n", static_cast<int>(name_width), "name", "type", "shape", "bytes",
                "file offset");
    for (const GgufTensor& t : file.tensors()) {
      Append(out, "  %-*.*s  %-7s %-24s %14zu %14zu\n", static_cast<int>(name_width), static_cast<int>(t.name.size()),
                  t.name.data(), DTypeName(t.type), t.ShapeString().c_str(), t.nbytes, file.data_offset() + t.offset);
    }
  }

  const Totals totals = Summarize(file);
  std::string by_type;
  for (const auto& [name, tt] : totals.by_type) {
    by_type += (by_type.empty() ? "" : ", ") + name + " " + HumanBytes(tt.bytes) + " (" + std::to_string(tt.tensors) + ")";
  }
  Append(out, "\n%zu tensors, %s%s%s; %llu parameters\n", file.tensors().size(), HumanBytes(totals.bytes).c_str(),
              by_type.empty() ? "" : ": ", by_type.c_str(), static_cast<unsigned long long>(totals.parameters));
}

std::string PrintJson(const GgufFile& file, bool list_tensors) {
  nlohmann::ordered_json out;
  out["file"] = file.path();
  out["version"] = file.version();
  out["file_size"] = file.file_size();
  out["alignment"] = file.alignment();
  out["data_offset"] = file.data_offset();
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  nlohmann::ordered_json types = nlohmann::ordered_json::object();
  for (const auto& [key, value] : file.metadata()) {
    metadata[std::string(key)] = ValueJson(value);
    types[std::string(key)] = TypeLabel(value);
  }
  out["metadata"] = std::move(metadata);
  out["metadata_types"] = std::move(types);
  if (list_tensors) {
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (const GgufTensor& t : file.tensors()) {
      tensors.push_back({{"name", std::string(t.name)},
                         {"type", DTypeName(t.type)},
                         {"shape", std::vector<int64_t>(t.ne, t.ne + t.n_dims)},
                         {"bytes", t.nbytes},
                         {"offset", t.offset},
                         {"file_offset", file.data_offset() + t.offset}});
    }
    out["tensors"] = std::move(tensors);
  }
  const Totals totals = Summarize(file);
  nlohmann::ordered_json by_type = nlohmann::ordered_json::object();
  for (const auto& [name, tt] : totals.by_type) by_type[name] = {{"tensors", tt.tensors}, {"bytes", tt.bytes}};
  out["summary"] = {{"tensors", file.tensors().size()},
                    {"bytes", totals.bytes},
                    {"parameters", totals.parameters},
                    {"by_type", std::move(by_type)}};
  // Strings from the file need not be UTF-8: replace bad bytes rather than throw.
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

Result<std::string> Inspect(const std::string& gguf_path, const InspectOptions& options) {
  auto file = GgufFile::Open(gguf_path);
  if (!file.ok()) return file.status();
  if (options.json) return PrintJson(**file, options.tensors);
  std::string text;
  PrintText(text, **file, options.tensors);
  return text;
}

}  // namespace gemlet::tools
