// `gemlet inspect FILE [--tensors] [--json]`: a GGUF file's header, metadata, tensor table and totals.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

int RunInspect(int argc, char** argv) {
  CLI::App app{"Print a GGUF file's metadata and tensor table.", "gemlet inspect"};
  std::string path;
  tools::InspectOptions options;
  app.add_option("file", path, "the GGUF file")->required();
  app.add_flag("--tensors", options.tensors, "also list every tensor: name, type, shape, bytes, file offset");
  app.add_flag("--json", options.json, "print JSON instead of text (arrays over 64 elements are abbreviated)");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  Result<std::string> report = tools::Inspect(path, options);
  if (!report.ok()) return Fail(report.status());
  std::fputs(report->c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : Fail("cannot write the output");
}

}  // namespace

GEMLET_COMMAND("inspect", "print a GGUF file's metadata and tensor table", RunInspect);

}  // namespace gemlet::cli
