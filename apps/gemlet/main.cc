// gemlet: the command-line front end; dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "command.h"

namespace {
void PrintUsage() {
  auto commands = gemlet::cli::Commands();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::printf("gemlet: run Gemma models locally from GGUF files\n\nusage: gemlet <command> [options]\n\ncommands:\n");
  for (const auto& c : commands) std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf("\n'gemlet <command> --help' shows the options of a command.\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    PrintUsage();
    return argc < 2 ? gemlet::cli::kUsageError : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("gemlet 0.1.0\n");
    return 0;
  }
  for (const auto& c : gemlet::cli::Commands()) {
    if (std::strcmp(c.name, argv[1]) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "gemlet: unknown command '%s' (try 'gemlet --help')\n", argv[1]);
  return gemlet::cli::kUsageError;
}
