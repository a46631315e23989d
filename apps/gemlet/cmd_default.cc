// `gemlet default [NAME]`: the store's default model, the one run, chat, serve and the tasks use
// when neither -m nor $GEMLET_MODEL names one. `gemlet pull` sets the first model it installs.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunDefault(int argc, char** argv) {
  CLI::App app{"Show or set the default model: the one used when neither -m nor $GEMLET_MODEL names one"};
  app.name("gemlet default");
  std::string name, dir;
  bool clear = false;
  auto* name_opt = app.add_option("NAME", name, "an installed model to make the default");
  app.add_flag("--clear", clear, "have no default model (a command without -m then fails)")->excludes(name_opt);
  AddStoreFlag(app, &dir);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  auto store = OpenStore(dir);
  if (!store.ok()) return Fail(store.status());
  if (clear || !name.empty()) {
    if (Status st = (*store)->SetDefaultModel(name); !st.ok()) return Fail(st);
  }
  Result<std::string> current = (*store)->DefaultModel();
  if (!current.ok()) return Fail(current.status());
  if (current->empty()) {
    std::printf("no default model in %s ('gemlet pull gemma4-e2b' installs one and makes it the default)\n",
                (*store)->dir().c_str());
  } else {
    std::printf("%s\n", current->c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("default", "show or set the model used when -m is not given", RunDefault);

}  // namespace gemlet::cli
