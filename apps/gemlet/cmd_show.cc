// `gemlet show NAME`: one stored model's versions, digests, sources and files.
#include <cstdio>
#include <ctime>

#include "command.h"
#include "gemlet/tools.hpp"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunShow(int argc, char** argv) {
  CLI::App app{"One stored model: its versions, digests, sources and files"};
  app.name("gemlet show");
  std::string name;
  std::unique_ptr<ModelStore> store;
  if (std::optional<int> code = ParseModelCommand(app, argc, argv, &name, &store)) return *code;
  auto m = store->Get(name);
  if (!m.ok()) return Fail(m.status());
  std::printf("name:     %s\nactive:   %s\nprevious: %s\nmanifest: %s\n", m->name.c_str(), m->active.c_str(),
              m->previous.empty() ? "-" : m->previous.c_str(), m->manifest.empty() ? "-" : m->manifest.c_str());
  for (const StoredVersion& v : m->versions) {
    char when[32];
    const std::time_t t = static_cast<std::time_t>(v.installed_at);
    std::tm tm{};
    localtime_r(&t, &tm);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    std::printf("version %s%s\n  size:      %s (%llu bytes)\n  sha256:    %s\n  source:    %s\n  installed: %s\n  file:      %s\n",
                v.version.c_str(), v.version == m->active ? " (active)" : "", HumanBytes(v.size).c_str(),
                static_cast<unsigned long long>(v.size), v.sha256.c_str(), v.source.c_str(), when, v.path.c_str());
  }
  // The towers run/chat/serve load with this model without --mmproj (cli_common.h: ResolveMmprojPath).
  if (auto towers = store->Get(name + "-mmproj"); towers.ok()) {
    auto takes = tools::ReadTowers(towers->Find(towers->active)->path);
    std::string what = !takes.ok() ? "unreadable: " + takes.message()
                       : takes->images && takes->audio ? "images and audio"
                       : takes->audio                  ? "audio"
                                                       : "images";
    std::printf("towers:   %s %s (loaded with %s without --mmproj; takes %s)\n", towers->name.c_str(),
                towers->active.c_str(), name.c_str(), what.c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("show", "one stored model's versions, digests and files", RunShow);

}  // namespace gemlet::cli
