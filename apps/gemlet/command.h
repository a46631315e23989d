// Subcommand registry: each cmd_*.cc registers a name, a one-line summary and a Run function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gemlet/status.hpp"

namespace CLI {
class App;
class Validator;
}

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

// Exit codes: 1 for a model, file or input error; 2 for a usage error (a bad or missing flag).
constexpr int kInputError = 1;
constexpr int kUsageError = 2;

// Prints "gemlet: <message>" to stderr and returns kInputError.
int Fail(const std::string& message);
// Prints "gemlet: <message>" (which names the flag) to stderr and returns kUsageError.
int UsageError(const std::string& message);
// A failed call's status: kInvalidArgument (an option the library refused) is a usage error.
int Fail(const Status& status);

// Parses a subcommand's flags. Returns nullopt when the command should go on; otherwise the exit
// code to return at once: 0 after --help (printed to stdout), kUsageError after one
// "gemlet: <command>: <what is wrong> (see 'gemlet <command> --help')" line on stderr.
std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv);

// Flag checks with short messages ("--threads: 'x' is not a number >= 0"); CLI11's own range
// checks print the whole range of a double.
const CLI::Validator& NonNegative();
const CLI::Validator& Positive();

}  // namespace gemlet::cli

#define GEMLET_COMMAND(name, summary, fn) \
  static ::gemlet::cli::CommandRegistrar gemlet_command_registrar_##fn(name, summary, fn)
