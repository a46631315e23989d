// `gemlet rm NAME`: remove a model (every version) from the store.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunRm(int argc, char** argv) {
  CLI::App app{"Remove a model, every version of it, from the store"};
  app.name("gemlet rm");
  std::string name;
  std::unique_ptr<ModelStore> store;
  if (std::optional<int> code = ParseModelCommand(app, argc, argv, &name, &store)) return *code;
  if (Status st = store->Remove(name); !st.ok()) return Fail(st);
  std::printf("removed %s\n", name.c_str());
  return 0;
}

}  // namespace

GEMLET_COMMAND("rm", "remove a model from the store", RunRm);

}  // namespace gemlet::cli
