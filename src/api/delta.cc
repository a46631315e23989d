// The delta API (include/gemlet/delta.hpp) over src/store/delta.h: report translation only. In a
// build without the model store (no OpenSSL for the target) every call says so.
#include "gemlet/delta.hpp"

#ifdef GEMLET_HAVE_STORE
#include "store/delta.h"
#include "store/sha256.h"
#endif

namespace gemlet::delta {

#ifdef GEMLET_HAVE_STORE

bool Available() { return true; }

Result<DiffReport> Diff(const std::string& old_gguf, const std::string& new_gguf, const std::string& patch_out) {
  ASSIGN_OR_RETURN(store::DeltaDiffReport r, store::DiffGguf(old_gguf, new_gguf, patch_out));
  DiffReport out;
  out.patch_bytes = r.patch_bytes;
  out.new_file_bytes = r.new_file_bytes;
  out.tensors_total = r.tensors_total;
  out.tensors_changed = r.tensors_changed;
  out.tensors_added = r.tensors_added;
  out.tensors_removed = r.tensors_removed;
  out.tensors_moved = r.tensors_moved;
  out.metadata_changed = r.metadata_changed;
  out.literal_bytes = r.literal_bytes;
  out.copied_bytes = r.copied_bytes;
  out.old_sha256 = r.old_sha256;
  out.new_sha256 = r.new_sha256;
  return out;
}

Result<ApplyReport> Apply(const std::string& old_gguf, const std::string& patch, const std::string& new_out,
                          const ApplyOptions& options) {
  store::DeltaApplyOptions o;
  o.verify_old = options.verify_old;
  o.progress = options.progress;
  ASSIGN_OR_RETURN(store::DeltaApplyReport r, store::ApplyDelta(old_gguf, patch, new_out, o));
  return ApplyReport{r.bytes_written, r.bytes_copied, r.bytes_literal, r.sha256};
}

Result<PatchInfo> ReadPatchInfo(const std::string& patch) {
  ASSIGN_OR_RETURN(store::DeltaPatchInfo i, store::ReadDeltaPatchInfo(patch));
  PatchInfo out;
  out.version = i.version;
  out.old_size = i.old_size;
  out.old_sha256 = i.old_sha256;
  out.new_size = i.new_size;
  out.new_sha256 = i.new_sha256;
  out.patch_bytes = i.patch_bytes;
  out.literal_bytes = i.literal_bytes;
  out.copied_bytes = i.copied_bytes;
  return out;
}

Result<std::string> FileSha256(const std::string& path) { return store::Sha256File(path); }

Status VerifyFile(const std::string& path, const std::string& sha256_hex) {
  Result<std::string> expected = store::ParseSha256Hex(sha256_hex);
  if (!expected.ok()) return Status::Error(StatusCode::kInvalidArgument, expected.message());
  ASSIGN_OR_RETURN(std::string actual, store::Sha256File(path));
  if (actual != *expected) {
    return Status::Error("'" + path + "' has SHA-256 " + actual + ", expected " + *expected);
  }
  return Status::Ok();
}

#else

namespace {
Status NotBuilt(const char* what) {
  return Status::Error(std::string(what) +
                       ": this gemlet was built without the model store (no OpenSSL libcrypto for its target), "
                       "so it has no SHA-256 and no delta patches");
}
}  // namespace

bool Available() { return false; }
Result<DiffReport> Diff(const std::string&, const std::string&, const std::string&) { return NotBuilt("diff"); }
Result<ApplyReport> Apply(const std::string&, const std::string&, const std::string&, const ApplyOptions&) {
  return NotBuilt("apply");
}
Result<PatchInfo> ReadPatchInfo(const std::string&) { return NotBuilt("reading a patch"); }
Result<std::string> FileSha256(const std::string&) { return NotBuilt("SHA-256"); }
Status VerifyFile(const std::string&, const std::string&) { return NotBuilt("verifying a file"); }

#endif

Result<ApplyReport> Apply(const std::string& old_gguf, const std::string& patch, const std::string& new_out) {
  return Apply(old_gguf, patch, new_out, ApplyOptions{});
}

}  // namespace gemlet::delta
