// `gemlet update NAME`: the newest version NAME's manifest lists, installed and switched to once
// it verifies.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunUpdate(int argc, char** argv) {
  CLI::App app{"Install the newest version of a model that its manifest lists and switch to it once it verifies "
               "(the old version is removed then, unless --keep-old: then 'gemlet rollback NAME' returns to it)"};
  app.name("gemlet update");
  std::string name, store;
  FetchFlags f;
  app.add_option("NAME", name, "an installed model")->required();
  app.add_flag("--keep-old", f.options.keep_old, "keep the version replaced, for 'gemlet rollback'");
  AddStoreFlag(app, &store);
  AddFetchFlags(app, &f);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  f.options.store_dir = StoreDir(store);
  AttachProgress(&f);
  Result<UpdateResult> r = Update(name, f.options);
  EndProgress();
  if (!r.ok()) return Fail(r.status());
  if (!r->updated) {
    std::printf("%s is up to date (version %s)\n", r->name.c_str(), r->from.c_str());
  } else {
    std::printf("updated %s: %s -> %s (%s): %s\n", r->name.c_str(), r->from.c_str(), r->to.c_str(), r->how.c_str(),
                r->path.c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("update", "install and switch to the newest version of a stored model", RunUpdate);

}  // namespace gemlet::cli
