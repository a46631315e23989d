// Subcommand registry storage and the shared error helper.
#include "command.h"

#include <cstdio>

namespace gemlet::cli {

std::vector<Command>& Commands() {
  static std::vector<Command> commands;
  return commands;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "gemlet: %s\n", message.c_str());
  return 1;
}

}  // namespace gemlet::cli
