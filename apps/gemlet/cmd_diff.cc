// `gemlet diff OLD NEW -o PATCH`: a tensor-level patch that turns OLD into NEW (docs/delta.md).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/delta.hpp"

namespace gemlet::cli {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int RunDiff(int argc, char** argv) {
  CLI::App app{"Write a patch that rebuilds NEW from OLD: NEW's changed tensors and metadata, copies of the rest"};
  app.name("gemlet diff");
  std::string old_path, new_path, patch_path;
  app.add_option("old", old_path, "the GGUF file the patch applies to")->required()->check(CLI::ExistingFile);
  app.add_option("new", new_path, "the GGUF file the patch makes")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", patch_path, "the patch to write")->required();
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;

  Result<delta::DiffReport> report = delta::Diff(old_path, new_path, patch_path);
  if (!report.ok()) return Fail(report.status());
  const delta::DiffReport& r = *report;
  std::printf("wrote %s: %d of %d tensors changed, %d added, %d removed", patch_path.c_str(),
              r.tensors_changed, r.tensors_total, r.tensors_added, r.tensors_removed);
  if (r.tensors_moved > 0) std::printf(" (%d copied from another name)", r.tensors_moved);
  std::printf("; metadata %s\n", r.metadata_changed ? "changed" : "unchanged");
  const double percent = r.new_file_bytes ? 100.0 * static_cast<double>(r.patch_bytes) / r.new_file_bytes : 0.0;
  std::printf("  patch %.2f MiB = %.2f%% of NEW's %.2f MiB (%.2f MiB copied from OLD)\n", MiB(r.patch_bytes), percent,
              MiB(r.new_file_bytes), MiB(r.copied_bytes));
  std::printf("  OLD sha256 %s\n  NEW sha256 %s\n", r.old_sha256.c_str(), r.new_sha256.c_str());
  return 0;
}

}  // namespace

GEMLET_COMMAND("diff", "write a tensor-level patch from one GGUF file to another (gemlet patch applies it)", RunDiff);

}  // namespace gemlet::cli
