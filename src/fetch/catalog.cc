// The catalog's file format and where it is looked for.
#include "fetch/catalog.h"

#include <cstdlib>
#include <filesystem>

#include "base/json_input.h"
#include "fetch/catalog_builtin.h"
#include "store/fs_util.h"
#include "store/sha256.h"

namespace gemlet::fetch {

const CatalogEntry* Catalog::Find(std::string_view name) const {
  for (const CatalogEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Catalog::Names() const {
  std::string out;
  for (const CatalogEntry& e : entries) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

Result<Catalog> ParseCatalog(std::string_view text, const std::string& where) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, where));
  if (!j.is_object() || !j.contains("models") || !j["models"].is_array()) {
    return Status::Error(where + ": a catalog is an object with a \"models\" array");
  }
  Catalog c;
  c.where = where;
  for (size_t i = 0; i < j["models"].size(); ++i) {
    const nlohmann::json& m = j["models"][i];
    const std::string at = where + ": models[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("name") || !m["name"].is_string() || !m.contains("source") ||
        !m["source"].is_string()) {
      return Status::Error(at + " needs a \"name\" and a \"source\" string");
    }
    CatalogEntry e;
    e.name = m["name"].get<std::string>();
    e.source = m["source"].get<std::string>();
    RETURN_IF_ERROR(ModelStore::CheckName(e.name, "model name").WithContext(at));
    const bool hf = e.source.rfind("hf://", 0) == 0;
    if (!hf && e.source.rfind("https://", 0) != 0 && e.source.rfind("http://", 0) != 0) {
      return Status::Error(at + ".source: '" + e.source + "' is not an hf:// or http(s):// source");
    }
    if (m.contains("sha256") && !m["sha256"].is_null()) {
      if (!m["sha256"].is_string()) return Status::Error(at + ".sha256 must be a string");
      Result<std::string> d = store::ParseSha256Hex(m["sha256"].get<std::string>());
      if (!d.ok()) return Status::Error(at + ".sha256: " + d.message());
      e.sha256 = *d;
    }
    if (m.contains("summary") && m["summary"].is_string()) e.summary = m["summary"].get<std::string>();
    if (m.contains("mmproj") && !m["mmproj"].is_null()) {
      if (!m["mmproj"].is_string()) return Status::Error(at + ".mmproj must be a string (another entry's name)");
      e.mmproj = m["mmproj"].get<std::string>();
    }
    if (c.Find(e.name) != nullptr) return Status::Error(at + ".name: '" + e.name + "' is listed twice");
    c.entries.push_back(std::move(e));
  }
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const CatalogEntry& e = c.entries[i];
    if (e.mmproj.empty()) continue;
    const CatalogEntry* towers = c.Find(e.mmproj);
    if (towers == nullptr || towers == &e || !towers->mmproj.empty()) {
      return Status::Error(where + ": models[" + std::to_string(i) + "].mmproj: '" + e.mmproj +
                           "' is not another entry of the catalog without towers of its own");
    }
  }
  return c;
}

Result<Catalog> LoadCatalog(const FetchOptions& options, const std::string& store_dir) {
  std::string path = options.catalog;
  if (path.empty()) {
    if (const char* env = std::getenv("GEMLET_CATALOG"); env != nullptr && *env) path = env;
  }
  if (path.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(store_dir + "/catalog.json", ec)) path = store_dir + "/catalog.json";
  }
  if (path.empty()) return ParseCatalog(kBuiltinCatalog, "the built-in catalog");
  ASSIGN_OR_RETURN(std::string text, store::ReadSmallFile(path));
  return ParseCatalog(text, path);
}

}  // namespace gemlet::fetch
