// Subcommand registry storage and the shared error helper.
#include "command.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

namespace gemlet::cli {

std::vector<Command>& Commands() {
  static std::vector<Command> commands;
  return commands;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "gemlet: %s\n", message.c_str());
  return kInputError;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "gemlet: %s\n", message.c_str());
  return kUsageError;
}

int Fail(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument ? UsageError(status.message()) : Fail(status.message());
}

namespace {
CLI::Validator NumberAtLeast(double min, bool inclusive, const std::string& description) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && end != nullptr && *end == '\0';
        if (number && (inclusive ? v >= min : v > min)) return std::string();
        return "'" + text + "' is not " + description;
      },
      "", description);
}
}  // namespace

const CLI::Validator& NonNegative() {
  static const CLI::Validator v = NumberAtLeast(0, true, "a number >= 0");
  return v;
}
const CLI::Validator& Positive() {
  static const CLI::Validator v = NumberAtLeast(0, false, "a number > 0");
  return v;
}

std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (char& c : what) c = c == '\n' ? ' ' : c;  // one line, whatever CLI11 wrote
    const std::string name = app.get_name();  // "gemlet run"
    const std::string command = name.rfind("gemlet ", 0) == 0 ? name.substr(7) : name;
    std::fprintf(stderr, "gemlet: %s: %s (see '%s --help')\n", command.c_str(), what.c_str(), name.c_str());
    return kUsageError;
  }
  return std::nullopt;
}

}  // namespace gemlet::cli
