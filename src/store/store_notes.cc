// What the model store keeps besides models: the default model (DIR/.default) and what `gemlet
// bench --spec` measured per host and model (DIR/.speculation.json). Both names start with '.', so
// no model name can clash with them; both are replaced by one atomic rename under the store's lock.
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "gemlet/store.hpp"
#include "store/fs_util.h"

namespace gemlet {

namespace fs = std::filesystem;

namespace {

std::string DefaultPath(const ModelStore& s) { return s.dir() + "/.default"; }
std::string SpeculationPath(const ModelStore& s) { return s.dir() + "/.speculation.json"; }
Result<store::FileLock> Lock(const ModelStore& s) { return store::FileLock::Acquire(s.dir() + "/.lock", /*blocking=*/true); }

std::string Absolute(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : p.string();
}

Result<nlohmann::json> ReadRecords(const ModelStore& s) {
  const std::string path = SpeculationPath(s);
  if (!fs::exists(path)) return nlohmann::json::array();
  ASSIGN_OR_RETURN(std::string text, store::ReadSmallFile(path));
  Result<nlohmann::json> parsed = ParseJson(text, path);
  // Every field of the type it is read as, so that reading one never throws.
  const auto well_formed = [](const nlohmann::json& j) {
    if (!j.is_object()) return false;
    for (const char* k : {"host", "model", "spec", "draft_model"}) {
      if (j.contains(k) && !j[k].is_string()) return false;
    }
    for (const char* k : {"model_size", "max_draft", "acceptance", "break_even", "speedup", "measured_at"}) {
      if (j.contains(k) && !j[k].is_number()) return false;
    }
    return true;
  };
  if (!parsed.ok() || !parsed->is_array() || !std::all_of(parsed->begin(), parsed->end(), well_formed)) {
    return Status::Error("'" + path + "' is not a list of speculation records (remove it; `gemlet bench --spec` writes it again)");
  }
  return std::move(parsed).value();
}

bool SameKey(const nlohmann::json& j, const SpeculationRecord& r) {
  return j.is_object() && j.value("host", "") == r.host && j.value("model", "") == r.model &&
         j.value("model_size", uint64_t{0}) == r.model_size && j.value("spec", "") == r.spec &&
         j.value("draft_model", "") == r.draft_model;
}

}  // namespace

Result<std::string> ModelStore::DefaultModel() const {
  const std::string path = DefaultPath(*this);
  if (!fs::exists(path)) return std::string();
  ASSIGN_OR_RETURN(std::string name, store::ReadSmallFile(path));
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  // A default whose model was removed since is no default.
  if (name.empty() || !CheckName(name, "model name").ok() || !Get(name).ok()) return std::string();
  return name;
}

Status ModelStore::SetDefaultModel(const std::string& name) {
  ASSIGN_OR_RETURN(store::FileLock lock, Lock(*this));
  if (name.empty()) {
    std::error_code ec;
    fs::remove(DefaultPath(*this), ec);
    return Status::Ok();
  }
  RETURN_IF_ERROR(Get(name).status());
  return store::WriteFileAtomic(DefaultPath(*this), name + "\n");
}

std::string ModelStore::HostId() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown CPU";
}

Status ModelStore::RecordSpeculation(SpeculationRecord r) {
  if (r.spec != "lookup" && r.spec != "draft") return Status::Error(StatusCode::kInvalidArgument, "spec '" + r.spec + "' is not lookup or draft");
  if (r.host.empty()) r.host = HostId();
  r.model = Absolute(r.model);
  std::error_code ec;
  r.model_size = fs::file_size(r.model, ec);
  if (ec) return Status::Error("cannot read the model file '" + r.model + "': " + ec.message());
  if (!r.draft_model.empty()) r.draft_model = Absolute(r.draft_model);
  if (r.measured_at == 0) r.measured_at = static_cast<int64_t>(std::time(nullptr));
  ASSIGN_OR_RETURN(store::FileLock lock, Lock(*this));
  ASSIGN_OR_RETURN(nlohmann::json records, ReadRecords(*this));
  nlohmann::json kept = nlohmann::json::array();
  for (const nlohmann::json& j : records) {
    if (!SameKey(j, r)) kept.push_back(j);
  }
  kept.push_back({{"host", r.host}, {"model", r.model}, {"model_size", r.model_size}, {"spec", r.spec},
                  {"draft_model", r.draft_model}, {"max_draft", r.max_draft}, {"acceptance", r.acceptance},
                  {"break_even", r.break_even}, {"speedup", r.speedup}, {"measured_at", r.measured_at}});
  return store::WriteFileAtomic(SpeculationPath(*this), kept.dump(1) + "\n");
}

Result<SpeculationRecord> ModelStore::FindSpeculation(const std::string& model_path, const std::string& spec) const {
  SpeculationRecord key;
  key.host = HostId();
  key.model = Absolute(model_path);
  std::error_code ec;
  key.model_size = fs::file_size(key.model, ec);
  if (ec) return SpeculationRecord{};
  key.spec = spec;
  ASSIGN_OR_RETURN(nlohmann::json records, ReadRecords(*this));
  for (const nlohmann::json& j : records) {
    if (!j.is_object() || j.value("host", "") != key.host || j.value("model", "") != key.model ||
        j.value("model_size", uint64_t{0}) != key.model_size || j.value("spec", "") != spec) {
      continue;
    }
    SpeculationRecord r = key;
    r.draft_model = j.value("draft_model", "");
    r.max_draft = j.value("max_draft", 0);
    r.acceptance = j.value("acceptance", 0.0);
    r.break_even = j.value("break_even", 0.0);
    r.speedup = j.value("speedup", 0.0);
    r.measured_at = j.value("measured_at", int64_t{0});
    return r;
  }
  return SpeculationRecord{};
}

}  // namespace gemlet
