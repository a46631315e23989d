// gemlet's model store: models installed by name and version in one folder, each file checked
// against its SHA-256 before it becomes visible, an active version per name that switches
// atomically, and a previous one to roll back to. Also the manifest format that names models.
//
// No network here (the gemlet_store library needs only OpenSSL's libcrypto for SHA-256): apps bring
// their own downloader and hand the finished file to Install; `gemlet pull` uses the libcurl
// fetcher of gemlet/fetch.hpp. Layout and guarantees: docs/store.md.
//
// Several processes may use one store: changes take a lock on the folder (DIR/.lock), and readers
// see each model's state file either before or after a change (it is replaced by a rename), never
// half of one. A ModelStore object is not for use from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gemlet/status.hpp"

namespace gemlet {

struct StoredVersion {
  std::string version;
  std::string path;    // the installed file (read-only)
  std::string sha256;  // 64 lowercase hex digits
  uint64_t size = 0;
  std::string source;  // the URL it came from, or the file it was installed from
  int64_t installed_at = 0;  // Unix seconds
};

struct StoredModel {
  std::string name;
  std::string active;    // the version NAME resolves to
  std::string previous;  // what Rollback returns to; "" when there is none (its file is kept only then)
  std::string manifest;  // where `update` looks for newer versions ("" when installed from a URL or file)
  std::vector<StoredVersion> versions;  // installed, in the order they were installed
  const StoredVersion* Find(std::string_view version) const;
  const StoredVersion* Active() const { return Find(active); }
};

// What Verify found for one installed version.
struct VerifyResult {
  std::string name, version, path;
  bool ok = false;
  std::string problem;  // when !ok: "missing", "size 12 instead of 34", "SHA-256 ... instead of ..."
};

// What `gemlet bench --spec` measured for one model file on one host: the task presets speculate
// only where such a record shows a gain (docs/speculative.md).
struct SpeculationRecord {
  std::string host;         // the CPU's model name (ModelStore::HostId(); filled in when empty)
  std::string model;        // the model file (made absolute when recorded)
  uint64_t model_size = 0;  // its size (filled in): a file replaced under the same name is another model
  std::string spec;         // "lookup" or "draft"
  std::string draft_model;  // spec draft: the draft model's file
  int max_draft = 0;        // tokens drafted at most per step
  double acceptance = 0;    // drafted tokens kept / drafted
  double break_even = 0;    // the acceptance at which speculation costs what it saves (0: not measured)
  double speedup = 0;       // decode time without / with speculation, measured on the workload
  int64_t measured_at = 0;  // Unix seconds (filled in when 0)
};

struct InstallOptions {
  std::string source;    // recorded as StoredVersion::source
  std::string manifest;  // recorded as StoredModel::manifest when not empty
  bool activate = true;  // make it the active version
  // When activating over another version: keep its file (it becomes `previous`). Otherwise it is
  // removed once the new version is active and there is no previous version.
  bool keep_old = false;
  // Move the file into the store (a rename: the file must be on the store's filesystem, e.g. in
  // partial_dir()); otherwise it is copied and the original stays where it is.
  bool move = false;
  // The caller has just hashed `file` itself and found `sha256` (the fetcher hashes a download to
  // decide whether to keep it): the file is not read a second time. Only with move, for a file in
  // partial_dir() that nothing else writes.
  bool digest_checked = false;
};

class ModelStore {
 public:
  // $XDG_DATA_HOME/gemlet/models, else ~/.local/share/gemlet/models ("" when neither is known).
  static std::string DefaultDir();
  // Opens (creating) the store in `dir`.
  static Result<std::unique_ptr<ModelStore>> Open(const std::string& dir);
  ~ModelStore();

  const std::string& dir() const;
  // Where downloads in progress are kept: on the store's filesystem, so installing one is a rename.
  std::string partial_dir() const;

  Result<std::vector<StoredModel>> List() const;
  // An error names the model and the store when it is not installed.
  Result<StoredModel> Get(const std::string& name) const;
  // "NAME" (the active version) or "NAME:VERSION" to the installed file's path.
  Result<std::string> Resolve(const std::string& ref) const;

  // Checks `file` against `sha256` (64 hex digits; empty: the digest is computed and recorded)
  // and its size, then installs it as NAME VERSION. The file is in place, read-only and synced
  // before the state names it; with activate, the switch is one atomic rename of the state.
  // Installing a version that is installed with the same digest only activates it; with another
  // digest it is refused.
  Result<StoredVersion> Install(const std::string& name, const std::string& version, const std::string& file,
                                const std::string& sha256, const InstallOptions& options);
  // Makes an installed version the active one (the active one becomes `previous`; keep_old as in
  // InstallOptions).
  Status Activate(const std::string& name, const std::string& version, bool keep_old);
  // Back to the previous version; the version left becomes `previous` (rolling back twice returns).
  // Returns the version now active.
  Result<std::string> Rollback(const std::string& name);
  // Every version of NAME.
  Status Remove(const std::string& name);
  // Re-hashes the installed files of NAME ("" for all models). Also removes what interrupted
  // changes left (files no state names, half-written state), so afterwards the store holds exactly
  // what its states list.
  Result<std::vector<VerifyResult>> Verify(const std::string& name);
  // Where update looks for NAME's versions from now on.
  Status SetManifest(const std::string& name, const std::string& manifest);

  // The model to use when none is named (`gemlet pull` sets the first one it installs): "" when none
  // is set or the one set has been removed.
  Result<std::string> DefaultModel() const;
  // Sets it to an installed model ("" clears it).
  Status SetDefaultModel(const std::string& name);

  // Speculation measurements kept in the store's folder (DIR/.speculation.json), one per host, model
  // file and spec: a new one replaces the old.
  Status RecordSpeculation(SpeculationRecord record);
  // The record for this host (HostId()), this model file as it is now (path and size) and spec;
  // an empty spec in the result when there is none.
  Result<SpeculationRecord> FindSpeculation(const std::string& model_path, const std::string& spec) const;
  // The CPU's model name (/proc/cpuinfo), what a speed measurement holds for.
  static std::string HostId();

  // Model names and versions: letters, digits, '.', '_', '-', up to 128, not starting with '.'.
  static Status CheckName(std::string_view name, std::string_view what);

 private:
  ModelStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A manifest: the models a user (or an organisation's mirror) offers, as JSON:
//   {"models": [{"name": "gemma-3-1b-it", "notes": "...",
//                "versions": [{"version": "1", "url": "...", "size": 123, "sha256": "...", "notes": "...",
//                              "patches": [{"from": "0", "url": "...", "size": 12, "sha256": "..."}]}]}]}
// Versions are listed oldest first: the last one is the newest. A url may be relative (to the
// manifest's own URL or folder) or hf://ORG/REPO/FILE[@REV]. Docs: docs/store.md.
struct ManifestPatch {
  std::string from;  // the installed version it applies to
  std::string url;
  uint64_t size = 0;
  std::string sha256;  // of the patch file
};

struct ManifestVersion {
  std::string version;
  std::string url;
  uint64_t size = 0;  // 0: unknown
  std::string sha256;
  std::string notes;
  std::vector<ManifestPatch> patches;
  const ManifestPatch* PatchFrom(std::string_view from) const;
};

struct ManifestModel {
  std::string name;
  std::string notes;
  std::vector<ManifestVersion> versions;
  const ManifestVersion* Latest() const { return versions.empty() ? nullptr : &versions.back(); }
  const ManifestVersion* Find(std::string_view version) const;
};

struct Manifest {
  std::string source;  // where it was read from
  std::vector<ManifestModel> models;
  const ManifestModel* Find(std::string_view name) const;
  // `source` (a URL or a path) names the manifest in errors and is the base of relative URLs.
  // Errors name the field: "manifest.json: models[0].versions[1].sha256: 'xy' is not a SHA-256 digest".
  static Result<Manifest> Parse(std::string_view json, const std::string& source);
};

}  // namespace gemlet
