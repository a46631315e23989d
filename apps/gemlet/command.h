// Subcommand registry: each cmd_*.cc registers a name, a one-line summary and a Run function.
#pragma once

#include <string>
#include <vector>

namespace gemlet::cli {

// argv[0] is the subcommand name; returns the process exit code.
using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

std::vector<Command>& Commands();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn run) {
    Commands().push_back({name, summary, run});
  }
};

// Prints "gemlet: <message>" to stderr and returns the exit code for a usage or input error.
int Fail(const std::string& message);

}  // namespace gemlet::cli

#define GEMLET_COMMAND(name, summary, fn) \
  static ::gemlet::cli::CommandRegistrar gemlet_command_registrar_##fn(name, summary, fn)
