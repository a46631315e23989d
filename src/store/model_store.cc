// The model store (include/gemlet/store.hpp): DIR/NAME/model.json names the installed versions of
// NAME, each a read-only file in DIR/NAME/VERSION/. The state file is the only truth: a file it
// does not name is invisible and removed by the next change, and every change is one atomic rename
// of it, so an interrupted change leaves the store as it was before or after.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "gemlet/store.hpp"
#include "store/fs_util.h"
#include "store/sha256.h"

namespace gemlet {

namespace fs = std::filesystem;
using store::FileLock;

const StoredVersion* StoredModel::Find(std::string_view version) const {
  for (const StoredVersion& v : versions) {
    if (v.version == version) return &v;
  }
  return nullptr;
}

struct ModelStore::Impl {
  std::string dir;

  std::string ModelDir(const std::string& name) const { return dir + "/" + name; }
  std::string StatePath(const std::string& name) const { return ModelDir(name) + "/model.json"; }
  Result<FileLock> Lock() const { return FileLock::Acquire(dir + "/.lock", /*blocking=*/true); }

  Result<StoredModel> Read(const std::string& name) const;
  Status Write(const StoredModel& m) const;
  void Collect(const std::string& name) const;
  void CollectAll() const;
  Status Switch(StoredModel& m, const std::string& version, bool keep_old) const;
};

namespace {

std::string Errno() { return std::strerror(errno); }

// The installed file's name: the source's own when it is a plain .gguf name (so `gemlet show`
// and the packed-weight cache's log lines say what it is), else NAME.gguf.
std::string FileNameFor(const std::string& name, const std::string& source) {
  std::string base = source;
  if (const size_t q = base.find_first_of("?#"); q != std::string::npos) base.resize(q);
  if (const size_t slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  const bool plain = base.size() > 5 && base.size() <= 200 && base.compare(base.size() - 5, 5, ".gguf") == 0 &&
                     base[0] != '.' && std::all_of(base.begin(), base.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                     });
  return plain ? base : name + ".gguf";
}

// Removes a folder tree by first renaming it away, so that it disappears from view at once even if
// the removal is interrupted (the next change removes the rest).
void RemoveTree(const std::string& dir, const std::string& store_dir) {
  std::error_code ec;
  const std::string trash = store_dir + "/.trash-" + std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr)) +
                            "-" + fs::path(dir).filename().string();
  if (::rename(dir.c_str(), trash.c_str()) == 0) {
    store::SyncDir(store_dir);
    fs::remove_all(trash, ec);
  } else {
    fs::remove_all(dir, ec);
  }
}

Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::Error("cannot copy '" + from + "' to '" + to + "': " + ec.message());
  return Status::Ok();
}

}  // namespace

Status ModelStore::CheckName(std::string_view name, std::string_view what) {
  const bool ok = !name.empty() && name.size() <= 128 && name[0] != '.' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                  });
  if (ok) return Status::Ok();
  std::string m(what);  // appended piecewise: GCC 12 warns (-Wrestrict) on a chain of + here
  m.append(" '").append(name).append("' is not valid (letters, digits, '.', '_' and '-', not starting with '.')");
  return Status::Error(StatusCode::kInvalidArgument, m);
}

Result<StoredModel> ModelStore::Impl::Read(const std::string& name) const {
  const std::string path = StatePath(name);
  if (!fs::exists(path)) return Status::Error("no model '" + name + "' in the store " + dir);
  ASSIGN_OR_RETURN(std::string text, store::ReadSmallFile(path));
  Result<nlohmann::json> parsed = ParseJson(text, path);
  const nlohmann::json j = parsed.ok() ? std::move(parsed).value() : nlohmann::json();
  if (!j.is_object() || !j.value("versions", nlohmann::json()).is_array()) {
    return Status::Error("'" + path + "' is not a model state file (edit or remove it)");
  }
  StoredModel m;
  m.name = name;
  m.active = j.value("active", "");
  m.previous = j.value("previous", "");
  m.manifest = j.value("manifest", "");
  for (const nlohmann::json& v : j["versions"]) {
    if (!v.is_object()) return Status::Error("'" + path + "': versions holds a non-object");
    StoredVersion sv;
    sv.version = v.value("version", "");
    const std::string file = v.value("file", "");
    sv.sha256 = v.value("sha256", "");
    sv.size = v.value("size", uint64_t{0});
    sv.source = v.value("source", "");
    sv.installed_at = v.value("installed_at", int64_t{0});
    if (!CheckName(sv.version, "version").ok() || file.empty() || file.find("..") != std::string::npos ||
        !store::ParseSha256Hex(sv.sha256).ok()) {
      return Status::Error("'" + path + "': a version entry is damaged (version '" + sv.version + "')");
    }
    sv.path = ModelDir(name) + "/" + file;
    m.versions.push_back(std::move(sv));
  }
  if (m.Find(m.active) == nullptr) return Status::Error("'" + path + "': the active version '" + m.active + "' is not listed");
  if (!m.previous.empty() && m.Find(m.previous) == nullptr) m.previous.clear();
  return m;
}

Status ModelStore::Impl::Write(const StoredModel& m) const {
  nlohmann::json versions = nlohmann::json::array();
  const std::string prefix = ModelDir(m.name) + "/";
  for (const StoredVersion& v : m.versions) {
    versions.push_back({{"version", v.version}, {"file", v.path.substr(prefix.size())}, {"sha256", v.sha256},
                        {"size", v.size}, {"source", v.source}, {"installed_at", v.installed_at}});
  }
  const nlohmann::json j = {{"format", 1}, {"name", m.name}, {"active", m.active}, {"previous", m.previous},
                            {"manifest", m.manifest}, {"versions", versions}};
  return store::WriteFileAtomic(StatePath(m.name), j.dump(2) + "\n");
}

// Under the lock: removes from DIR/NAME what its state does not name (a version whose install or
// removal was interrupted, a state file's .tmp), and the folder of a model that never got a state.
void ModelStore::Impl::Collect(const std::string& name) const {
  const std::string mdir = ModelDir(name);
  std::error_code ec;
  if (!fs::exists(StatePath(name))) {
    if (fs::is_directory(mdir)) RemoveTree(mdir, dir);
    return;
  }
  Result<StoredModel> m = Read(name);
  if (!m.ok()) return;  // a state we cannot read is the user's to look at, never ours to delete
  for (const fs::directory_entry& e : fs::directory_iterator(mdir, ec)) {
    const std::string entry = e.path().filename().string();
    if (entry == "model.json") continue;
    if (!e.is_directory() || m->Find(entry) == nullptr) {
      fs::remove_all(e.path(), ec);
      continue;
    }
    const std::string keep = m->Find(entry)->path;
    for (const fs::directory_entry& f : fs::directory_iterator(e.path(), ec)) {
      if (f.path().string() != keep) fs::remove_all(f.path(), ec);
    }
  }
}

// Under the lock: makes `version` active in one rename of the state file. The version replaced
// becomes `previous` with keep_old, else it is dropped; a name keeps at most those two. Dropped
// files go after the rename, so a crash in between leaves only files no state names, which the
// next change removes.
Status ModelStore::Impl::Switch(StoredModel& m, const std::string& version, bool keep_old) const {
  const std::string old = m.active;
  m.active = version;
  m.previous = keep_old && old != version ? old : std::string();
  std::erase_if(m.versions, [&](const StoredVersion& x) { return x.version != m.active && x.version != m.previous; });
  RETURN_IF_ERROR(Write(m));
  Collect(m.name);
  return Status::Ok();
}

void ModelStore::Impl::CollectAll() const {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string entry = e.path().filename().string();
    if (entry.rfind(".trash-", 0) == 0) {
      fs::remove_all(e.path(), ec);
    } else if (e.is_directory() && CheckName(entry, "model").ok()) {
      Collect(entry);
    }
  }
}

ModelStore::ModelStore() : impl_(std::make_unique<Impl>()) {}
ModelStore::~ModelStore() = default;

std::string ModelStore::DefaultDir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg == '/') return std::string(xdg) + "/gemlet/models";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') return std::string(home) + "/.local/share/gemlet/models";
  return std::string();
}

Result<std::unique_ptr<ModelStore>> ModelStore::Open(const std::string& dir) {
  if (dir.empty()) return Status::Error(StatusCode::kInvalidArgument, "no store folder: set XDG_DATA_HOME or HOME, or give one");
  std::error_code ec;
  fs::create_directories(dir + "/.partial", ec);
  if (ec) return Status::Error("cannot create the model store '" + dir + "': " + ec.message());
  std::unique_ptr<ModelStore> s(new ModelStore());
  const fs::path absolute = fs::absolute(dir, ec);
  s->impl_->dir = ec ? dir : absolute.lexically_normal().string();
  while (s->impl_->dir.size() > 1 && s->impl_->dir.back() == '/') s->impl_->dir.pop_back();
  return s;
}

const std::string& ModelStore::dir() const { return impl_->dir; }
std::string ModelStore::partial_dir() const { return impl_->dir + "/.partial"; }

Result<std::vector<StoredModel>> ModelStore::List() const {
  std::vector<StoredModel> out;
  std::error_code ec;
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(impl_->dir, ec)) {
    const std::string entry = e.path().filename().string();
    if (e.is_directory() && CheckName(entry, "model").ok() && fs::exists(impl_->StatePath(entry))) names.push_back(entry);
  }
  if (ec) return Status::Error("cannot list the store '" + impl_->dir + "': " + ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    ASSIGN_OR_RETURN(StoredModel m, impl_->Read(n));
    out.push_back(std::move(m));
  }
  return out;
}

Result<StoredModel> ModelStore::Get(const std::string& name) const {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  return impl_->Read(name);
}

Result<std::string> ModelStore::Resolve(const std::string& ref) const {
  const size_t colon = ref.find(':');
  const std::string name = ref.substr(0, colon);
  ASSIGN_OR_RETURN(StoredModel m, Get(name));
  const std::string version = colon == std::string::npos ? m.active : ref.substr(colon + 1);
  const StoredVersion* v = m.Find(version);
  if (v == nullptr) return Status::Error("model '" + name + "' has no version '" + version + "' in the store " + impl_->dir);
  return v->path;
}

Result<StoredVersion> ModelStore::Install(const std::string& name, const std::string& version, const std::string& file,
                                          const std::string& sha256, const InstallOptions& options) {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  RETURN_IF_ERROR(CheckName(version, "version"));
  std::string expected;
  if (!sha256.empty()) {
    Result<std::string> parsed = store::ParseSha256Hex(sha256);
    if (!parsed.ok()) return Status::Error(StatusCode::kInvalidArgument, parsed.message());
    expected = *parsed;
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return Status::Error("cannot read '" + file + "': " + Errno());

  // Copies land in the store's own folder first, so the bytes hashed are the bytes installed and
  // the final step is a rename on one filesystem.
  std::string staged = file;
  std::string copy;
  if (!options.move) {
    copy = partial_dir() + "/install-" + std::to_string(::getpid()) + "-" + name + "-" + version + ".gguf";
    RETURN_IF_ERROR(CopyFile(file, copy));
    staged = copy;
  }
  auto drop_copy = [&copy] {
    if (!copy.empty()) ::unlink(copy.c_str());
  };
  Result<std::string> digest =
      options.digest_checked && options.move && !expected.empty() ? Result<std::string>(expected) : store::Sha256File(staged);
  if (!digest.ok()) {
    drop_copy();
    return digest.status();
  }
  if (!expected.empty() && *digest != expected) {
    drop_copy();
    return Status::Error("'" + file + "' has SHA-256 " + *digest + ", not the expected " + expected + " (not installed)");
  }

  ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
  impl_->Collect(name);
  StoredModel m;
  m.name = name;
  if (fs::exists(impl_->StatePath(name))) {
    Result<StoredModel> read = impl_->Read(name);
    if (!read.ok()) {
      drop_copy();
      return read.status();
    }
    m = std::move(read).value();
  }
  if (const StoredVersion* have = m.Find(version)) {
    drop_copy();
    if (have->sha256 != *digest) {
      return Status::Error("version '" + version + "' of '" + name + "' is installed with SHA-256 " + have->sha256 +
                           ", not " + *digest + " ('gemlet rm " + name + "' first to replace it)");
    }
    const StoredVersion kept = *have;
    if (options.move) ::unlink(file.c_str());
    if (options.activate && m.active != version) RETURN_IF_ERROR(impl_->Switch(m, version, options.keep_old));
    return kept;
  }
  std::error_code ec;
  const std::string vdir = impl_->ModelDir(name) + "/" + version;
  fs::create_directories(vdir, ec);
  if (ec) {
    drop_copy();
    return Status::Error("cannot create '" + vdir + "': " + ec.message());
  }
  StoredVersion v;
  v.version = version;
  v.path = vdir + "/" + FileNameFor(name, options.source.empty() ? file : options.source);
  v.sha256 = *digest;
  v.size = static_cast<uint64_t>(st.st_size);
  v.source = options.source.empty() ? file : options.source;
  v.installed_at = static_cast<int64_t>(std::time(nullptr));
  ::chmod(staged.c_str(), 0444);  // installed files are never written again: a new version is a new file
  RETURN_IF_ERROR(store::SyncFile(staged));
  if (::rename(staged.c_str(), v.path.c_str()) != 0) {
    const std::string err = Errno();
    drop_copy();
    return Status::Error("cannot move '" + staged + "' into the store as '" + v.path + "': " + err +
                         (options.move ? " (the file must be on the store's filesystem)" : ""));
  }
  store::SyncDir(vdir);
  store::SyncDir(impl_->ModelDir(name));

  if (!options.manifest.empty()) m.manifest = options.manifest;
  m.versions.push_back(v);
  if (m.active.empty()) m.active = version;  // a first version is active whatever activate says
  if (options.activate && m.active != version) {
    RETURN_IF_ERROR(impl_->Switch(m, version, options.keep_old));
    return v;
  }
  RETURN_IF_ERROR(impl_->Write(m));
  impl_->Collect(name);
  return v;
}

Status ModelStore::Activate(const std::string& name, const std::string& version, bool keep_old) {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
  impl_->Collect(name);
  ASSIGN_OR_RETURN(StoredModel m, impl_->Read(name));
  if (m.Find(version) == nullptr) return Status::Error("model '" + name + "' has no version '" + version + "' installed");
  if (m.active == version) return Status::Ok();
  return impl_->Switch(m, version, keep_old);
}

Result<std::string> ModelStore::Rollback(const std::string& name) {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
  impl_->Collect(name);
  ASSIGN_OR_RETURN(StoredModel m, impl_->Read(name));
  if (m.previous.empty()) {
    return Status::Error("model '" + name + "' has no previous version to roll back to (an update keeps one only "
                         "with --keep-old)");
  }
  const StoredVersion* prev = m.Find(m.previous);
  if (prev == nullptr || !fs::exists(prev->path)) return Status::Error("the previous version of '" + name + "' has no file");
  std::swap(m.active, m.previous);
  RETURN_IF_ERROR(impl_->Write(m));
  return m.active;
}

Status ModelStore::Remove(const std::string& name) {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
  if (!fs::exists(impl_->StatePath(name))) return Status::Error("no model '" + name + "' in the store " + impl_->dir);
  RemoveTree(impl_->ModelDir(name), impl_->dir);
  return Status::Ok();
}

Status ModelStore::SetManifest(const std::string& name, const std::string& manifest) {
  RETURN_IF_ERROR(CheckName(name, "model name"));
  ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
  ASSIGN_OR_RETURN(StoredModel m, impl_->Read(name));
  if (m.manifest == manifest) return Status::Ok();
  m.manifest = manifest;
  return impl_->Write(m);
}

Result<std::vector<VerifyResult>> ModelStore::Verify(const std::string& name) {
  if (!name.empty()) RETURN_IF_ERROR(CheckName(name, "model name"));
  std::vector<StoredModel> models;
  {
    ASSIGN_OR_RETURN(FileLock lock, impl_->Lock());
    if (name.empty()) {
      impl_->CollectAll();
      ASSIGN_OR_RETURN(models, List());
    } else {
      impl_->Collect(name);
      ASSIGN_OR_RETURN(StoredModel m, impl_->Read(name));
      models.push_back(std::move(m));
    }
  }
  // Hashing (seconds per GiB) runs without the lock: files are never changed in place, and one
  // removed meanwhile is reported missing.
  std::vector<VerifyResult> out;
  for (const StoredModel& m : models) {
    for (const StoredVersion& v : m.versions) {
      VerifyResult r{m.name, v.version, v.path, false, ""};
      struct stat st {};
      if (::stat(v.path.c_str(), &st) != 0) {
        r.problem = "the file is missing";
      } else if (static_cast<uint64_t>(st.st_size) != v.size) {
        r.problem = "size " + std::to_string(st.st_size) + " instead of " + std::to_string(v.size);
      } else if (Result<std::string> d = store::Sha256File(v.path); !d.ok()) {
        r.problem = d.message();
      } else if (*d != v.sha256) {
        r.problem = "SHA-256 " + *d + " instead of " + v.sha256;
      } else {
        r.ok = true;
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace gemlet
