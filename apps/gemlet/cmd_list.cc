// `gemlet list`: the models in the store, their active versions and sizes.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunList(int argc, char** argv) {
  CLI::App app{"The models in the store"};
  app.name("gemlet list");
  std::string store;
  AddStoreFlag(app, &store);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  auto s = OpenStore(store);
  if (!s.ok()) return Fail(s.status());
  auto all = (*s)->List();
  if (!all.ok()) return Fail(all.status());
  if (all->empty()) {
    std::fprintf(stderr, "(no models in %s: 'gemlet pull' installs one)\n", (*s)->dir().c_str());
    return 0;
  }
  std::printf("%-32s %-14s %10s  %s\n", "NAME", "VERSION", "SIZE", "PREVIOUS");
  for (const StoredModel& m : *all) {
    const StoredVersion* v = m.Active();
    std::printf("%-32s %-14s %10s  %s\n", m.name.c_str(), m.active.c_str(), v ? HumanBytes(v->size).c_str() : "?",
                m.previous.empty() ? "-" : m.previous.c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("list", "the models in the store", RunList);

}  // namespace gemlet::cli
