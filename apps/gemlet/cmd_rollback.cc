// `gemlet rollback NAME`: back to the version an update replaced (kept with --keep-old).
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunRollback(int argc, char** argv) {
  CLI::App app{"Switch a stored model back to its previous version (kept by 'gemlet update --keep-old'); rolling "
               "back again returns"};
  app.name("gemlet rollback");
  std::string name;
  std::unique_ptr<ModelStore> store;
  if (std::optional<int> code = ParseModelCommand(app, argc, argv, &name, &store)) return *code;
  Result<std::string> now = store->Rollback(name);
  if (!now.ok()) return Fail(now.status());
  std::printf("%s is at version %s again\n", name.c_str(), now->c_str());
  return 0;
}

}  // namespace

GEMLET_COMMAND("rollback", "switch a stored model back to its previous version", RunRollback);

}  // namespace gemlet::cli
