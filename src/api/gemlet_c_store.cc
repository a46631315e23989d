// The C API's model store (gemlet_store: a thin wrapper of gemlet::ModelStore, include/gemlet/store.hpp)
// and model files' digests and delta patches (gemlet/delta.hpp).
#include "api/gemlet_c_internal.h"
#include "gemlet/delta.hpp"
#ifdef GEMLET_HAVE_STORE
#include "gemlet/store.hpp"
#endif

using namespace gemlet::capi;

extern "C" {

#ifdef GEMLET_HAVE_STORE
struct gemlet_store {
  std::unique_ptr<gemlet::ModelStore> store;
};

gemlet_status gemlet_store_open(const char* dir, gemlet_store** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    const std::string d = dir != nullptr && *dir ? std::string(dir) : gemlet::ModelStore::DefaultDir();
    auto opened = gemlet::ModelStore::Open(d);
    if (!opened.ok()) return Report(opened.status());
    *out = new gemlet_store{std::move(opened).value()};
    return GEMLET_OK;
  });
}

void gemlet_store_free(gemlet_store* store) { delete store; }

gemlet_status gemlet_store_install(gemlet_store* store, const char* name, const char* version, const char* file,
                                   const char* sha256, unsigned flags) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr || version == nullptr || file == nullptr) return NullHandle(name == nullptr ? "name" : version == nullptr ? "version" : "file");
    gemlet::InstallOptions o;
    o.activate = (flags & GEMLET_STORE_ACTIVATE) != 0;
    o.keep_old = (flags & GEMLET_STORE_KEEP_OLD) != 0;
    o.move = (flags & GEMLET_STORE_MOVE) != 0;
    return Report(store->store->Install(name, version, file, sha256 != nullptr ? sha256 : "", o).status());
  });
}

gemlet_status gemlet_store_verify(gemlet_store* store, const char* name, int* n_failed) {
  return Guard([&] {
    if (n_failed != nullptr) *n_failed = 0;
    if (store == nullptr) return NullHandle("store");
    auto results = store->store->Verify(name != nullptr ? name : "");
    if (!results.ok()) return Report(results.status());
    int failed = 0;
    std::string first;
    for (const gemlet::VerifyResult& r : *results) {
      if (r.ok) continue;
      if (failed++ == 0) first = r.name + " " + r.version + " (" + r.path + "): " + r.problem;
    }
    if (n_failed != nullptr) *n_failed = failed;
    return failed == 0 ? GEMLET_OK : Fail(GEMLET_ERROR, first);
  });
}

gemlet_status gemlet_store_switch(gemlet_store* store, const char* name, const char* version, bool keep_old) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr || version == nullptr) return NullHandle(name == nullptr ? "name" : "version");
    return Report(store->store->Activate(name, version, keep_old));
  });
}

gemlet_status gemlet_store_rollback(gemlet_store* store, const char* name) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr) return NullHandle("name");
    return Report(store->store->Rollback(name).status());
  });
}

gemlet_status gemlet_store_remove(gemlet_store* store, const char* name) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr) return NullHandle("name");
    return Report(store->store->Remove(name));
  });
}

gemlet_status gemlet_store_resolve(const gemlet_store* store, const char* ref, char** path) {
  return Guard([&] {
    if (store == nullptr || ref == nullptr || path == nullptr) return NullHandle(store == nullptr ? "store" : ref == nullptr ? "ref" : "path");
    *path = nullptr;
    auto p = store->store->Resolve(ref);
    if (!p.ok()) return Report(p.status());
    *path = CopyOut(*p);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_store_active_version(const gemlet_store* store, const char* name, char** version) {
  return Guard([&] {
    if (store == nullptr || name == nullptr || version == nullptr) return NullHandle(store == nullptr ? "store" : name == nullptr ? "name" : "version");
    *version = nullptr;
    auto m = store->store->Get(name);
    if (!m.ok()) return Report(m.status());
    *version = CopyOut(m->active);
    return GEMLET_OK;
  });
}
#else
// No OpenSSL for this target: the store's entry points exist (the ABI is the same everywhere) and
// say why they cannot work.
struct gemlet_store {};
namespace {
gemlet_status NoStore() { return Fail(GEMLET_ERROR, "this libgemlet was built without the model store (no OpenSSL)"); }
}  // namespace
gemlet_status gemlet_store_open(const char*, gemlet_store** out) {
  if (out != nullptr) *out = nullptr;
  return NoStore();
}
void gemlet_store_free(gemlet_store* store) { delete store; }
gemlet_status gemlet_store_install(gemlet_store*, const char*, const char*, const char*, const char*, unsigned) { return NoStore(); }
gemlet_status gemlet_store_verify(gemlet_store*, const char*, int* n_failed) {
  if (n_failed != nullptr) *n_failed = 0;
  return NoStore();
}
gemlet_status gemlet_store_switch(gemlet_store*, const char*, const char*, bool) { return NoStore(); }
gemlet_status gemlet_store_rollback(gemlet_store*, const char*) { return NoStore(); }
gemlet_status gemlet_store_remove(gemlet_store*, const char*) { return NoStore(); }
gemlet_status gemlet_store_resolve(const gemlet_store*, const char*, char** path) {
  if (path != nullptr) *path = nullptr;
  return NoStore();
}
gemlet_status gemlet_store_active_version(const gemlet_store*, const char*, char** version) {
  if (version != nullptr) *version = nullptr;
  return NoStore();
}
#endif

}  // extern "C"

// ---- model files: digests and delta patches ----

bool gemlet_delta_available(void) { return gemlet::delta::Available(); }

gemlet_status gemlet_file_sha256(const char* path, char out_hex[65]) {
  if (path == nullptr) return NullHandle("path");
  if (out_hex == nullptr) return NullHandle("out_hex");
  return Guard([&] {
    gemlet::Result<std::string> digest = gemlet::delta::FileSha256(path);
    if (!digest.ok()) return Report(digest.status());
    std::memcpy(out_hex, digest->c_str(), 65);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_file_verify(const char* path, const char* sha256_hex) {
  if (path == nullptr) return NullHandle("path");
  if (sha256_hex == nullptr) return NullHandle("sha256_hex");
  return Guard([&] { return Report(gemlet::delta::VerifyFile(path, sha256_hex)); });
}

gemlet_patch_info gemlet_patch_info_default(void) {
  gemlet_patch_info info{};
  info.struct_size = sizeof(info);
  return info;
}

gemlet_status gemlet_patch_info_read(const char* patch_path, gemlet_patch_info* info) {
  if (patch_path == nullptr) return NullHandle("patch_path");
  if (info == nullptr || info->struct_size < sizeof(size_t)) return NullHandle("info");
  return Guard([&] {
    gemlet::Result<gemlet::delta::PatchInfo> p = gemlet::delta::ReadPatchInfo(patch_path);
    if (!p.ok()) return Report(p.status());
    gemlet_patch_info full = gemlet_patch_info_default();
    full.old_size = p->old_size;
    std::memcpy(full.old_sha256, p->old_sha256.c_str(), 65);
    full.new_size = p->new_size;
    std::memcpy(full.new_sha256, p->new_sha256.c_str(), 65);
    full.patch_size = p->patch_bytes;
    full.literal_bytes = p->literal_bytes;
    // Only what the caller's struct holds: an older, smaller header keeps its size.
    const size_t n = info->struct_size < sizeof(full) ? info->struct_size : sizeof(full);
    std::memcpy(static_cast<void*>(info), &full, n);
    info->struct_size = n;
    return GEMLET_OK;
  });
}

gemlet_status gemlet_delta_apply(const char* old_path, const char* patch_path, const char* new_path,
                                 gemlet_progress_fn progress, void* user_data) {
  if (old_path == nullptr) return NullHandle("old_path");
  if (patch_path == nullptr) return NullHandle("patch_path");
  if (new_path == nullptr) return NullHandle("new_path");
  return Guard([&] {
    gemlet::delta::ApplyOptions options;
    if (progress != nullptr) {
      options.progress = [progress, user_data](uint64_t done, uint64_t total) {
        return progress(total ? static_cast<float>(static_cast<double>(done) / static_cast<double>(total)) : 1.0f,
                        user_data);
      };
    }
    return Report(gemlet::delta::Apply(old_path, patch_path, new_path, options).status());
  });
}
