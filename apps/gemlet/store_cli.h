// What the model-store subcommands (pull, update, rollback, list, show, verify, rm) share: the
// --store flag, opening the store, the download progress bar.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "gemlet/fetch.hpp"
#include "gemlet/store.hpp"

namespace gemlet::cli {

// --store DIR (default: $XDG_DATA_HOME/gemlet/models, else ~/.local/share/gemlet/models).
void AddStoreFlag(CLI::App& app, std::string* dir);
std::string StoreDir(const std::string& flag);
Result<std::unique_ptr<ModelStore>> OpenStore(const std::string& flag);
// `gemlet CMD NAME [--store DIR]` (rm, rollback, show): adds NAME and --store to app, parses, and
// opens the store into *store. Returns the exit code when the command ends there (help, a usage
// error, a store that does not open).
std::optional<int> ParseModelCommand(CLI::App& app, int argc, char** argv, std::string* name,
                                     std::unique_ptr<ModelStore>* store);

// The fetcher's flags (--manifest, --keep-old is the caller's; --retries, -v, hidden test knobs)
// and its progress bar and notes on stderr: a bar with speed and ETA on a terminal, nothing
// elsewhere; notes (resuming, retrying) on a terminal or with -v.
struct FetchFlags {
  FetchOptions options;
  bool verbose = false;
};
void AddFetchFlags(CLI::App& app, FetchFlags* f);
void AttachProgress(FetchFlags* f);
void EndProgress();

std::string HumanBytes(uint64_t bytes);

}  // namespace gemlet::cli
