// The model-store commands' shared flags and the download progress bar.
#include "store_cli.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli_common.h"
#include "command.h"

namespace gemlet::cli {

namespace {
bool g_bar_shown = false;  // a progress line is on stderr and needs clearing before a note
}

void AddStoreFlag(CLI::App& app, std::string* dir) {
  app.add_option("--store", *dir, "the model store (default: $XDG_DATA_HOME/gemlet/models, else "
                 "~/.local/share/gemlet/models)");
}

std::string StoreDir(const std::string& flag) { return flag.empty() ? ModelStore::DefaultDir() : flag; }

Result<std::unique_ptr<ModelStore>> OpenStore(const std::string& flag) { return ModelStore::Open(StoreDir(flag)); }

std::optional<int> ParseModelCommand(CLI::App& app, int argc, char** argv, std::string* name,
                                     std::unique_ptr<ModelStore>* store) {
  std::string dir;
  app.add_option("NAME", *name, "an installed model")->required();
  AddStoreFlag(app, &dir);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return code;
  auto opened = OpenStore(dir);
  if (!opened.ok()) return Fail(opened.status());
  *store = std::move(opened).value();
  return std::nullopt;
}

std::string HumanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  }
  return buf;
}

void AddFetchFlags(CLI::App& app, FetchFlags* f) {
  FetchOptions& o = f->options;
  app.add_option("--manifest", o.manifest, "the manifest (URL or file) that names the models (default: "
                 "$GEMLET_MANIFEST, else the one the model was installed from)");
  app.add_option("--retries", o.retries, "attempts in a row without progress before giving up")->check(NonNegative());
  app.add_option("--cacert", o.ca_file, "trust the certificate authorities in this PEM file for https (instead of the system's)");
  app.add_flag("-v,--verbose", f->verbose, "print resumes and retries also when stderr is not a terminal");
  // Test knobs: short pauses and stalls, and a pretended free space (the disk-space check).
  app.add_option("--retry-delay-ms", o.retry_delay_ms, "first pause between attempts")->group("")->check(NonNegative());
  app.add_option("--stall-seconds", o.stall_seconds, "retry a transfer that receives nothing this long")->group("")->check(Positive());
  app.add_option("--assume-free", o.assume_free_bytes, "free bytes to assume on the store's disk")->group("");
}

void EndProgress() {
  if (g_bar_shown) std::fputs("\r\033[K", stderr);
  g_bar_shown = false;
}

void AttachProgress(FetchFlags* f) {
  const bool tty = StderrIsTerminal();
  if (tty || f->verbose) {
    f->options.log = [](const std::string& line) {
      EndProgress();
      std::fprintf(stderr, "gemlet: %s\n", line.c_str());
    };
  }
  if (!tty) return;
  f->options.progress = [](const FetchProgress& p) {
    constexpr int kWidth = 30;
    const double fraction = p.total > 0 ? std::min(1.0, static_cast<double>(p.done) / static_cast<double>(p.total)) : 0;
    std::string bar(static_cast<size_t>(fraction * kWidth), '=');
    if (bar.size() < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::string tail;
    if (p.verifying) {
      tail = "verifying SHA-256";
    } else {
      tail = HumanBytes(static_cast<uint64_t>(p.bytes_per_second)) + "/s";
      if (p.total > p.done && p.bytes_per_second > 1) {
        const long eta = static_cast<long>(static_cast<double>(p.total - p.done) / p.bytes_per_second);
        char buf[32];
        std::snprintf(buf, sizeof buf, "  ETA %ld:%02ld", eta / 60, eta % 60);
        tail += buf;
      }
    }
    std::fprintf(stderr, "\r\033[K[%s] %3d%%  %s / %s  %s", bar.c_str(), static_cast<int>(fraction * 100),
                 HumanBytes(p.done).c_str(), p.total > 0 ? HumanBytes(p.total).c_str() : "?", tail.c_str());
    g_bar_shown = true;
  };
}

}  // namespace gemlet::cli
