// Manifest parsing (include/gemlet/store.hpp): JSON to plain structs, every error naming the
// manifest and the field, relative URLs made absolute against the manifest's own location.
#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "gemlet/store.hpp"
#include "store/sha256.h"

namespace gemlet {

namespace {

using nlohmann::json;

bool IsAbsoluteUrl(const std::string& url) {
  const size_t colon = url.find("://");
  return colon != std::string::npos && colon > 0 && url.find('/') > colon;
}

// "models/x.gguf" next to "https://host/dir/manifest.json" is "https://host/dir/models/x.gguf";
// next to "/srv/manifest.json" it is "/srv/models/x.gguf". An absolute path stays as it is.
std::string ResolveUrl(const std::string& url, const std::string& base) {
  if (IsAbsoluteUrl(url) || url.empty() || url[0] == '/') {
    if (!url.empty() && url[0] == '/' && IsAbsoluteUrl(base)) {
      const size_t host_end = base.find('/', base.find("://") + 3);
      return (host_end == std::string::npos ? base : base.substr(0, host_end)) + url;
    }
    return url;
  }
  std::string b = base;
  if (b.rfind("file://", 0) == 0) b = b.substr(7);
  const size_t slash = b.rfind('/');
  if (slash == std::string::npos || (IsAbsoluteUrl(b) && slash < b.find("://") + 3)) return url;
  return b.substr(0, slash + 1) + url;
}

struct Fields {
  const std::string& source;
  Status error;

  std::string Where(const std::string& path) const { return source + ": " + path; }
  std::string String(const json& j, const std::string& path, const char* key, bool required) {
    const json* v = j.contains(key) ? &j[key] : nullptr;
    if (v == nullptr || v->is_null()) {
      if (required && error.ok()) error = Status::Error(Where(path + "." + key) + " is missing");
      return std::string();
    }
    if (!v->is_string()) {
      if (error.ok()) error = Status::Error(Where(path + "." + key) + " is not a string");
      return std::string();
    }
    return v->get<std::string>();
  }
  uint64_t Size(const json& j, const std::string& path) {
    if (!j.contains("size") || j["size"].is_null()) return 0;
    if (!j["size"].is_number_unsigned()) {
      if (error.ok()) error = Status::Error(Where(path + ".size") + " is not a byte count");
      return 0;
    }
    return j["size"].get<uint64_t>();
  }
  std::string Digest(const json& j, const std::string& path, bool required) {
    const std::string text = String(j, path, "sha256", required);
    if (text.empty()) return text;
    Result<std::string> d = store::ParseSha256Hex(text);
    if (!d.ok()) {
      if (error.ok()) error = Status::Error(Where(path + ".sha256") + ": " + d.message());
      return std::string();
    }
    return *d;
  }
  void Name(const std::string& value, const std::string& path, const char* what) {
    if (value.empty() || !error.ok()) return;
    if (Status s = ModelStore::CheckName(value, what); !s.ok()) error = Status::Error(Where(path) + ": " + s.message());
  }
};

}  // namespace

const ManifestPatch* ManifestVersion::PatchFrom(std::string_view from) const {
  for (const ManifestPatch& p : patches) {
    if (p.from == from) return &p;
  }
  return nullptr;
}

const ManifestVersion* ManifestModel::Find(std::string_view version) const {
  for (const ManifestVersion& v : versions) {
    if (v.version == version) return &v;
  }
  return nullptr;
}

const ManifestModel* Manifest::Find(std::string_view name) const {
  for (const ManifestModel& m : models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

Result<Manifest> Manifest::Parse(std::string_view text, const std::string& source) {
  ASSIGN_OR_RETURN(json j, ParseJson(text, source));
  if (!j.is_object() || !j.contains("models") || !j["models"].is_array()) {
    return Status::Error(source + ": a manifest is an object with a \"models\" array");
  }
  Manifest m;
  m.source = source;
  Fields f{source, Status::Ok()};
  for (size_t i = 0; i < j["models"].size() && f.error.ok(); ++i) {
    const json& jm = j["models"][i];
    const std::string at = "models[" + std::to_string(i) + "]";
    if (!jm.is_object()) return Status::Error(f.Where(at) + " is not an object");
    ManifestModel model;
    model.name = f.String(jm, at, "name", true);
    f.Name(model.name, at + ".name", "model name");
    model.notes = f.String(jm, at, "notes", false);
    if (!jm.contains("versions") || !jm["versions"].is_array() || jm["versions"].empty()) {
      if (f.error.ok()) f.error = Status::Error(f.Where(at + ".versions") + " must list at least one version");
      break;
    }
    for (size_t k = 0; k < jm["versions"].size() && f.error.ok(); ++k) {
      const json& jv = jm["versions"][k];
      const std::string vat = at + ".versions[" + std::to_string(k) + "]";
      if (!jv.is_object()) return Status::Error(f.Where(vat) + " is not an object");
      ManifestVersion v;
      v.version = f.String(jv, vat, "version", true);
      f.Name(v.version, vat + ".version", "version");
      v.url = ResolveUrl(f.String(jv, vat, "url", true), source);
      v.size = f.Size(jv, vat);
      v.sha256 = f.Digest(jv, vat, /*required=*/true);  // what a name stands for must be checkable
      v.notes = f.String(jv, vat, "notes", false);
      if (jv.contains("patches")) {
        if (!jv["patches"].is_array()) {
          f.error = Status::Error(f.Where(vat + ".patches") + " is not an array");
          break;
        }
        for (size_t p = 0; p < jv["patches"].size() && f.error.ok(); ++p) {
          const json& jp = jv["patches"][p];
          const std::string pat = vat + ".patches[" + std::to_string(p) + "]";
          if (!jp.is_object()) return Status::Error(f.Where(pat) + " is not an object");
          ManifestPatch patch;
          patch.from = f.String(jp, pat, "from", true);
          patch.url = ResolveUrl(f.String(jp, pat, "url", true), source);
          patch.size = f.Size(jp, pat);
          patch.sha256 = f.Digest(jp, pat, true);
          v.patches.push_back(std::move(patch));
        }
      }
      if (model.Find(v.version) != nullptr && f.error.ok()) {
        f.error = Status::Error(f.Where(vat + ".version") + ": '" + v.version + "' is listed twice");
      }
      model.versions.push_back(std::move(v));
    }
    if (f.error.ok() && m.Find(model.name) != nullptr) f.error = Status::Error(f.Where(at + ".name") + ": '" + model.name + "' is listed twice");
    m.models.push_back(std::move(model));
  }
  if (!f.error.ok()) return f.error;
  return m;
}

}  // namespace gemlet
