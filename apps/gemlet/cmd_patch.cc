// `gemlet patch OLD PATCH -o NEW`: rebuilds NEW from OLD and a `gemlet diff` patch, verified against
// NEW's SHA-256 before it appears under its name (docs/delta.md).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/delta.hpp"

namespace gemlet::cli {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int RunPatch(int argc, char** argv) {
  CLI::App app{"Rebuild NEW from OLD and a patch written by gemlet diff; every chunk and NEW's SHA-256 are checked"};
  app.name("gemlet patch");
  std::string old_path, patch_path, new_path;
  bool info = false;
  app.add_option("old", old_path, "the GGUF file the patch was made from")->required()->check(CLI::ExistingFile);
  app.add_option("patch", patch_path, "the patch")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", new_path, "the file to write (replaced atomically if it exists)");
  app.add_flag("--info", info, "print what the patch applies to and makes, write nothing");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (!info && new_path.empty()) return UsageError("patch: --output is required (see 'gemlet patch --help')");

  if (info) {
    Result<delta::PatchInfo> p = delta::ReadPatchInfo(patch_path);
    if (!p.ok()) return Fail(p.status());
    Result<std::string> old_sha = delta::FileSha256(old_path);
    if (!old_sha.ok()) return Fail(old_sha.status());
    if (*old_sha != p->old_sha256) {
      return Fail("'" + old_path + "' is not the file the patch was made from: its SHA-256 is " + *old_sha +
                  ", the patch was made from " + p->old_sha256);
    }
    std::printf("%s: format %u, %.2f MiB, applies to %s\n  from %s (%llu bytes)\n  to   %s (%llu bytes)\n"
                "  %.2f MiB carried, %.2f MiB copied from OLD\n",
                patch_path.c_str(), p->version, MiB(p->patch_bytes), old_path.c_str(), p->old_sha256.c_str(),
                static_cast<unsigned long long>(p->old_size), p->new_sha256.c_str(),
                static_cast<unsigned long long>(p->new_size), MiB(p->literal_bytes), MiB(p->copied_bytes));
    return 0;
  }
  Result<delta::ApplyReport> report = delta::Apply(old_path, patch_path, new_path);
  if (!report.ok()) return Fail(report.status());
  const delta::ApplyReport& r = *report;
  std::printf("wrote %s: %.2f MiB (%.2f MiB from the patch, %.2f MiB copied from %s)\n  sha256 %s (verified)\n",
              new_path.c_str(), MiB(r.bytes_written), MiB(r.bytes_literal), MiB(r.bytes_copied), old_path.c_str(),
              r.sha256.c_str());
  return 0;
}

}  // namespace

GEMLET_COMMAND("patch", "rebuild a GGUF file from an older one and a gemlet diff patch, verified by SHA-256", RunPatch);

}  // namespace gemlet::cli
