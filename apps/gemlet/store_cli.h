// What the model-store subcommands (pull, update, rollback, list, show, verify, rm) share: the
// --store flag, opening the store, the download progress bar.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "gemlet/fetch.hpp"
#include "gemlet/store.hpp"

namespace gemlet::cli {

// --store DIR (default: $XDG_DATA_HOME/gemlet/models, else ~/.local/share/gemlet/models).
void AddStoreFlag(CLI::App& app, std::string* dir);
std::string StoreDir(const std::string& flag);
Result<std::unique_ptr<ModelStore>> OpenStore(const std::string& flag);

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
