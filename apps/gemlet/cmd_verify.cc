// `gemlet verify [NAME]`: re-hash the stored files (all models when no name) and clear what
// interrupted downloads and switches left.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunVerify(int argc, char** argv) {
  CLI::App app{"Check the stored files against their SHA-256 (every model when no NAME is given); also removes "
               "what interrupted changes left behind"};
  app.name("gemlet verify");
  std::string name, store;
  app.add_option("NAME", name, "an installed model");
  AddStoreFlag(app, &store);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  auto s = OpenStore(store);
  if (!s.ok()) return Fail(s.status());
  auto results = (*s)->Verify(name);
  if (!results.ok()) return Fail(results.status());
  int bad = 0;
  for (const VerifyResult& r : *results) {
    if (r.ok) {
      std::printf("ok      %s %s\n", r.name.c_str(), r.version.c_str());
    } else {
      ++bad;
      std::printf("FAILED  %s %s: %s (%s)\n", r.name.c_str(), r.version.c_str(), r.problem.c_str(), r.path.c_str());
    }
  }
  if (results->empty()) std::fprintf(stderr, "(no models in %s)\n", (*s)->dir().c_str());
  if (bad > 0) return Fail(std::to_string(bad) + " of " + std::to_string(results->size()) + " stored files failed the check "
                           "('gemlet rm NAME' and 'gemlet pull' again)");
  return 0;
}

}  // namespace

GEMLET_COMMAND("verify", "check the stored models' files against their SHA-256", RunVerify);

}  // namespace gemlet::cli
