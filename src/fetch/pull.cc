// `pull` and `update` (include/gemlet/fetch.hpp): where a URL, hf:// reference or manifest name
// leads, the download into the store's .partial folder, the digest check that decides whether it
// is kept, and the install; update applies the manifest's patch when there is one (ApplyPatchUpdate).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "fetch/catalog.h"
#include "fetch/http_download.h"
#include "gemlet/fetch.hpp"
#include "store/delta.h"
#include "store/fs_util.h"
#include "store/sha256.h"

namespace gemlet {

namespace {

// What a pull fetches and how it is installed.
struct Target {
  std::string url;
  std::vector<std::string> headers;
  std::string name, version, sha256, manifest;
  uint64_t size = 0;
  bool from_hub = false;  // an hf:// source: the hub can say the file's SHA-256 before the download
};

bool IsHttp(const std::string& s) { return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0; }

// Hugging Face's token goes only to its own endpoint (libcurl drops it on a redirect to another
// host, such as the CDN resolve/ redirects to).
std::vector<std::string> HfHeaders() {
  std::vector<std::string> h;
  if (const char* token = std::getenv("HF_TOKEN"); token != nullptr && *token) h.push_back(std::string("Authorization: Bearer ") + token);
  return h;
}

// "gemma-3-1b-it-Q4_0.gguf" -> "gemma-3-1b-it-Q4_0": a name for a model pulled by URL.
std::string NameFromUrl(const std::string& url) {
  std::string base = url.substr(0, url.find_first_of("?#"));
  base = base.substr(base.rfind('/') + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
  std::string out;
  for (char c : base) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '-';
  while (!out.empty() && out[0] == '.') out.erase(0, 1);
  return out.substr(0, 128);
}

std::string ManifestSource(const FetchOptions& o, const std::string& recorded) {
  if (!o.manifest.empty()) return o.manifest;
  if (const char* env = std::getenv("GEMLET_MANIFEST"); env != nullptr && *env) return env;
  return recorded;
}

// A path in a manifest source stays absolute, so that `update` finds it from any folder later.
std::string Canonical(const std::string& source) {
  if (IsHttp(source) || source.rfind("file://", 0) == 0) return source;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(source, ec);
  return ec ? source : p.lexically_normal().string();
}

Status UrlOf(const std::string& url, Target& t) {
  if (url.rfind("hf://", 0) == 0) {
    ASSIGN_OR_RETURN(t.url, ResolveHfUrl(url));
    t.headers = HfHeaders();
    t.from_hub = true;
    return Status::Ok();
  }
  if (!IsHttp(url)) return Status::Error("'" + url + "' is not an http(s):// or hf:// URL");
  t.url = url;
  return Status::Ok();
}

// A NAME of the catalog (no manifest given): its source, and its pinned digest if it has one.
Result<Target> FromCatalog(const std::string& ref, const ModelStore& store, const FetchOptions& o) {
  if (ref.find(':') != std::string::npos) {
    return Status::Error("'" + ref + "': versions of a name come from a manifest (give --manifest URL|FILE or set "
                         "GEMLET_MANIFEST); the catalog names one file per name");
  }
  ASSIGN_OR_RETURN(fetch::Catalog catalog, fetch::LoadCatalog(o, store.dir()));
  const fetch::CatalogEntry* e = catalog.Find(ref);
  if (e == nullptr) {
    return Status::Error("unknown model '" + ref + "': not a URL, not in " + catalog.where + " (" + catalog.Names() +
                         "), and no manifest to look it up in (give --manifest URL|FILE or set GEMLET_MANIFEST)");
  }
  Target t;
  RETURN_IF_ERROR(UrlOf(e->source, t).WithContext(catalog.where + ", " + e->name));
  t.name = e->name;
  t.sha256 = e->sha256;
  if (!o.sha256.empty() && !t.sha256.empty() && o.sha256 != t.sha256) {
    return Status::Error("--sha256 " + o.sha256 + " is not the digest " + catalog.where + " gives for " + e->name + " (" +
                         t.sha256 + ")");
  }
  if (t.sha256.empty()) t.sha256 = o.sha256;
  return t;
}

Result<Target> FromManifest(const std::string& ref, const ModelStore& store, const FetchOptions& o) {
  const size_t colon = ref.find(':');
  const std::string name = ref.substr(0, colon);
  RETURN_IF_ERROR(ModelStore::CheckName(name, "model name"));
  std::string recorded;
  if (Result<StoredModel> have = store.Get(name); have.ok()) recorded = have->manifest;
  const std::string source = ManifestSource(o, recorded);
  if (source.empty()) return FromCatalog(ref, store, o);
  ASSIGN_OR_RETURN(Manifest manifest, FetchManifest(source, o));
  const ManifestModel* m = manifest.Find(name);
  if (m == nullptr) {
    std::string names;
    for (const ManifestModel& x : manifest.models) names += (names.empty() ? "" : ", ") + x.name;
    return Status::Error("unknown model '" + name + "': the manifest " + source + " lists " + (names.empty() ? "none" : names));
  }
  const ManifestVersion* v = colon == std::string::npos ? m->Latest() : m->Find(ref.substr(colon + 1));
  if (v == nullptr) return Status::Error("the manifest " + source + " has no version '" + ref.substr(colon + 1) + "' of '" + name + "'");
  Target t;
  RETURN_IF_ERROR(UrlOf(v->url, t).WithContext("the manifest " + source + ", " + name + " " + v->version));
  t.name = name;
  t.version = v->version;
  t.sha256 = v->sha256;
  t.size = v->size;
  t.manifest = Canonical(source);
  if (!o.sha256.empty() && o.sha256 != t.sha256) {
    return Status::Error("--sha256 " + o.sha256 + " is not the digest the manifest gives for " + name + " " + v->version +
                         " (" + t.sha256 + ")");
  }
  return t;
}

void Note(const FetchOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

// Every download is checked against a SHA-256 that did not come with the bytes: given, from the
// manifest or the catalog, or the hub's record of an LFS file (asked before the download, so a
// swapped CDN object or a man in the middle of the CDN is caught). Without one, only when the user
// said to trust what comes.
Status FindDigest(Target& t, const FetchOptions& o) {
  if (t.sha256.empty() && t.from_hub) {
    ASSIGN_OR_RETURN(fetch::HubFileInfo hub, fetch::HeadHubFile(t.url, t.headers, o));
    if (!hub.sha256.empty()) {
      t.sha256 = hub.sha256;
      if (t.size == 0) t.size = hub.size;
      Note(o, t.url + ": the hub gives SHA-256 " + hub.sha256 + "; the download is checked against it");
    }
  }
  if (!t.sha256.empty()) return Status::Ok();
  if (!o.trust_unverified) {
    return Status::Error("no SHA-256 to check " + t.url + " against (no --sha256, manifest or catalog digest" +
                         std::string(t.from_hub ? ", and the hub gives none" : "") +
                         "): give --sha256 HEX, or --trust-unverified to install whatever the server sends");
  }
  Note(o, t.url + ": no SHA-256 to check against; installing the bytes as they come (--trust-unverified)");
  return Status::Ok();
}

// The file a download goes to: named by what it is a download of, so a later run finds it.
std::string PartialPath(const ModelStore& store, const Target& t) {
  return store.partial_dir() + "/" + store::Sha256Hex(t.url + "\n" + t.sha256).substr(0, 24) + ".part";
}

// Downloads, checks and installs. A download whose digest does not match is discarded whole:
// nothing tells which of its bytes are wrong, so no prefix of it may be resumed from. When it had
// been resumed, the old prefix may be the culprit (a file changed on a server that sent no
// validator), so it is fetched once more from the start before the pull fails.
Result<PullResult> Fetch(ModelStore& store, Target t, const FetchOptions& o) {
  if (!t.version.empty() && !t.sha256.empty()) {
    if (Result<StoredModel> have = store.Get(t.name); have.ok()) {
      if (const StoredVersion* v = have->Find(t.version); v != nullptr && v->sha256 == t.sha256) {
        RETURN_IF_ERROR(store.Activate(t.name, t.version, o.keep_old));
        if (!t.manifest.empty()) RETURN_IF_ERROR(store.SetManifest(t.name, t.manifest));
        return PullResult{t.name, t.version, v->path, v->sha256, v->size, true, nullptr};
      }
    }
  }
  fetch::DownloadRequest request;
  request.url = t.url;
  request.partial = PartialPath(store, t);
  request.expected_sha256 = t.sha256;
  request.expected_size = t.size;
  request.headers = t.headers;
  // The space check before any request, when the manifest gives the size (the download checks
  // again against what the server announces).
  if (t.size > 0) {
    std::error_code ec;
    const uint64_t have = std::filesystem::exists(request.partial) ? std::filesystem::file_size(request.partial, ec) : 0;
    uint64_t free_bytes = o.assume_free_bytes;
    if (free_bytes == 0) {
      Result<uint64_t> f = store::FreeBytes(store.partial_dir());
      free_bytes = f.ok() ? *f : UINT64_MAX;
    }
    if (have < t.size && free_bytes < t.size - have) {
      return Status::Error("not enough disk space in " + store.dir() + " for " + t.name + " " + t.version + ": " +
                           std::to_string((t.size - have) >> 20) + " MiB needed, " + std::to_string(free_bytes >> 20) + " MiB free");
    }
  }
  for (int round = 0;; ++round) {
    ASSIGN_OR_RETURN(fetch::DownloadOutcome got, fetch::Download(request, o));
    Result<std::string> digest = store::Sha256File(request.partial, [&](uint64_t done, uint64_t total) {
      if (o.progress) o.progress(FetchProgress{done, total, 0, true});
    });
    if (!digest.ok()) return digest.status();
    if (!t.sha256.empty() && *digest != t.sha256) {
      fetch::DiscardPartial(request.partial);
      if (got.resumed && round == 0) {
        Note(o, t.url + ": SHA-256 mismatch after a resumed download; downloading it again from the start");
        continue;
      }
      return Status::Error(t.url + ": SHA-256 " + *digest + ", expected " + t.sha256 + " (the download was discarded)");
    }
    if (t.version.empty()) t.version = digest->substr(0, 12);
    InstallOptions io;
    io.source = t.url;
    io.manifest = t.manifest;
    io.activate = true;
    io.keep_old = o.keep_old;
    io.move = true;
    io.digest_checked = true;
    ASSIGN_OR_RETURN(StoredVersion v, store.Install(t.name, t.version, request.partial, *digest, io));
    fetch::DiscardPartial(request.partial);
    ::unlink((request.partial + ".lock").c_str());
    return PullResult{t.name, v.version, v.path, v.sha256, v.size, false, nullptr};
  }
}

// update's patch step: the patch the manifest offers from the active version is downloaded into
// the store's .partial folder (resumable, checked against its SHA-256), then applied to the active
// file (store/delta.h: OLD's digest, every chunk's and NEW's checked, written atomically) into
// .partial, whose path is returned for the caller to install like a full download (checked once
// more against target.sha256). Any error here makes update fall back to the whole file.
Result<std::string> ApplyPatchUpdate(const ModelStore& store, const std::string& old_file, const ManifestPatch& patch,
                                     const ManifestVersion& target, const FetchOptions& options) {
  const std::string key = store::Sha256Hex(patch.url + "\n" + patch.sha256).substr(0, 24);
  fetch::DownloadRequest request;
  request.url = patch.url;
  request.partial = store.partial_dir() + "/" + key + ".patch.part";
  request.expected_sha256 = patch.sha256;
  request.expected_size = patch.size;
  ASSIGN_OR_RETURN(fetch::DownloadOutcome got, fetch::Download(request, options));
  (void)got;
  Result<std::string> digest = store::Sha256File(request.partial);
  if (!digest.ok()) return digest.status();
  if (!patch.sha256.empty() && *digest != patch.sha256) {
    fetch::DiscardPartial(request.partial);
    return Status::Error(patch.url + ": SHA-256 " + *digest + ", expected " + patch.sha256 + " (the patch was discarded)");
  }
  ASSIGN_OR_RETURN(store::DeltaPatchInfo info, store::ReadDeltaPatchInfo(request.partial));
  if (!target.sha256.empty() && info.new_sha256 != target.sha256) {
    fetch::DiscardPartial(request.partial);
    return Status::Error("the patch makes a file whose SHA-256 is " + info.new_sha256 + ", not version " + target.version +
                         "'s " + target.sha256);
  }
  const std::string out = store.partial_dir() + "/" + key + ".gguf";
  store::DeltaApplyOptions apply;
  Result<store::DeltaApplyReport> applied = store::ApplyDelta(old_file, request.partial, out, apply);
  fetch::DiscardPartial(request.partial);
  ::unlink((request.partial + ".lock").c_str());
  if (!applied.ok()) return applied.status();
  return out;
}

}  // namespace

Result<std::string> ResolveHfUrl(const std::string& ref) {
  if (ref.rfind("hf://", 0) != 0) return Status::Error("'" + ref + "' is not an hf:// reference");
  std::string rest = ref.substr(5);
  std::string rev = "main";
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    rev = rest.substr(at + 1);
    rest.resize(at);
  }
  const size_t a = rest.find('/');
  const size_t b = a == std::string::npos ? a : rest.find('/', a + 1);
  if (a == 0 || b == std::string::npos || b == a + 1 || b + 1 >= rest.size() || rev.empty() ||
      rest.find("..") != std::string::npos) {
    return Status::Error("'" + ref + "' is not hf://ORG/REPO/FILE[@REV]");
  }
  std::string endpoint = "https://huggingface.co";
  if (const char* env = std::getenv("HF_ENDPOINT"); env != nullptr && *env) endpoint = env;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint + "/" + rest.substr(0, b) + "/resolve/" + rev + "/" + rest.substr(b + 1);
}

Result<Manifest> FetchManifest(const std::string& source, const FetchOptions& options) {
  std::string url = source;
  std::vector<std::string> headers;
  if (source.rfind("hf://", 0) == 0) {
    ASSIGN_OR_RETURN(url, ResolveHfUrl(source));
    headers = HfHeaders();
  }
  Result<std::string> text = fetch::FetchText(url, headers, options);
  if (!text.ok()) return text.status().WithContext("reading the manifest");
  return Manifest::Parse(*text, IsHttp(url) ? url : Canonical(url));
}

namespace {
Result<PullResult> PullOne(const std::string& what, const FetchOptions& o) {
  const std::string dir = o.store_dir.empty() ? ModelStore::DefaultDir() : o.store_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<ModelStore> store, ModelStore::Open(dir));
  if (!o.sha256.empty()) {
    Result<std::string> d = store::ParseSha256Hex(o.sha256);
    if (!d.ok()) return Status::Error(StatusCode::kInvalidArgument, "--sha256: " + d.message());
  }
  FetchOptions opts = o;
  if (!o.sha256.empty()) opts.sha256 = *store::ParseSha256Hex(o.sha256);
  Target t;
  if (IsHttp(what) || what.rfind("hf://", 0) == 0) {
    RETURN_IF_ERROR(UrlOf(what, t));
    t.sha256 = opts.sha256;
    t.name = NameFromUrl(t.url);
    if (what.rfind("hf://", 0) == 0 && what.find('@') != std::string::npos && o.version.empty()) {
      t.version = what.substr(what.rfind('@') + 1);
      if (!ModelStore::CheckName(t.version, "version").ok()) t.version.clear();
    }
  } else {
    ASSIGN_OR_RETURN(t, FromManifest(what, *store, opts));
  }
  if (!o.name.empty()) t.name = o.name;
  if (!o.version.empty()) t.version = o.version;
  RETURN_IF_ERROR(ModelStore::CheckName(t.name, "model name"));
  if (!t.version.empty()) RETURN_IF_ERROR(ModelStore::CheckName(t.version, "version"));
  RETURN_IF_ERROR(FindDigest(t, opts));
  return Fetch(*store, std::move(t), opts);
}

// The catalog entry `what` names when it is a catalog name (no URL, no manifest in play).
std::optional<fetch::CatalogEntry> CatalogEntryOf(const std::string& what, const FetchOptions& o) {
  if (IsHttp(what) || what.rfind("hf://", 0) == 0 || what.find(':') != std::string::npos) return std::nullopt;
  const std::string dir = o.store_dir.empty() ? ModelStore::DefaultDir() : o.store_dir;
  auto store = ModelStore::Open(dir);
  if (!store.ok()) return std::nullopt;
  std::string recorded;
  if (Result<StoredModel> have = (*store)->Get(what); have.ok()) recorded = have->manifest;
  if (!ManifestSource(o, recorded).empty()) return std::nullopt;
  Result<fetch::Catalog> catalog = fetch::LoadCatalog(o, (*store)->dir());
  if (!catalog.ok()) return std::nullopt;
  const fetch::CatalogEntry* e = catalog->Find(what);
  if (e == nullptr) return std::nullopt;
  return *e;
}
}  // namespace

// A catalog name whose entry names towers brings them too, installed as NAME-mmproj (where
// run/chat/serve look for them): a multimodal model is not whole without them.
Result<PullResult> Pull(const std::string& what, const FetchOptions& o) {
  ASSIGN_OR_RETURN(PullResult r, PullOne(what, o));
  if (!o.with_mmproj) return r;
  const std::optional<fetch::CatalogEntry> entry = CatalogEntryOf(what, o);
  if (!entry || entry->mmproj.empty()) return r;
  FetchOptions towers = o;
  towers.sha256.clear();
  towers.version.clear();
  towers.name = r.name + "-mmproj";
  Result<PullResult> m = PullOne(entry->mmproj, towers);
  if (!m.ok()) return m.status().WithContext(r.name + " is installed, its towers are not ('gemlet pull " + what + "' again)");
  r.mmproj = std::make_shared<PullResult>(std::move(m).value());
  return r;
}

Result<UpdateResult> Update(const std::string& name, const FetchOptions& o) {
  const std::string dir = o.store_dir.empty() ? ModelStore::DefaultDir() : o.store_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<ModelStore> store, ModelStore::Open(dir));
  ASSIGN_OR_RETURN(StoredModel installed, store->Get(name));
  const std::string source = ManifestSource(o, installed.manifest);
  if (source.empty()) {
    return Status::Error("'" + name + "' was installed from a URL, not from a manifest: there is nothing to update it "
                         "from (give --manifest URL|FILE)");
  }
  ASSIGN_OR_RETURN(Manifest manifest, FetchManifest(source, o));
  const ManifestModel* m = manifest.Find(name);
  if (m == nullptr) return Status::Error("the manifest " + source + " does not list '" + name + "'");
  const ManifestVersion& latest = *m->Latest();
  UpdateResult r;
  r.name = name;
  r.from = installed.active;
  r.to = latest.version;
  const StoredVersion* active = installed.Active();
  if (active != nullptr && active->version == latest.version && active->sha256 == latest.sha256) {
    r.path = active->path;
    r.how = "up to date";
    return r;
  }
  Target t;
  RETURN_IF_ERROR(UrlOf(latest.url, t).WithContext("the manifest " + source + ", " + name + " " + latest.version));
  t.name = name;
  t.version = latest.version;
  t.sha256 = latest.sha256;
  t.size = latest.size;
  t.manifest = Canonical(source);
  if (const StoredVersion* have = installed.Find(latest.version); have != nullptr && have->sha256 == latest.sha256) {
    RETURN_IF_ERROR(store->Activate(name, latest.version, o.keep_old));
    r.updated = true;
    r.path = have->path;
    r.how = "installed already";
    return r;
  }
  if (const ManifestPatch* patch = latest.PatchFrom(installed.active); patch != nullptr && active != nullptr) {
    Result<std::string> patched = ApplyPatchUpdate(*store, active->path, *patch, latest, o);
    if (patched.ok()) {
      InstallOptions io;
      io.source = patch->url;
      io.manifest = t.manifest;
      io.keep_old = o.keep_old;
      io.move = true;
      ASSIGN_OR_RETURN(StoredVersion v, store->Install(name, latest.version, *patched, latest.sha256, io));
      r.updated = true;
      r.path = v.path;
      r.how = "patch";
      return r;
    }
    Note(o, "the patch from " + installed.active + " to " + latest.version + " was not used (" + patched.message() +
                "); downloading the whole file");
  }
  ASSIGN_OR_RETURN(PullResult pulled, Fetch(*store, std::move(t), o));
  r.updated = true;
  r.path = pulled.path;
  r.how = "full download";
  return r;
}

}  // namespace gemlet
