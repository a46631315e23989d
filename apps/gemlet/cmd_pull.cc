// `gemlet pull URL|hf://ORG/REPO/FILE[@REV]|NAME[:VERSION]`: download into the model store,
// resumable, checked against its SHA-256 before it becomes visible.
#include <cstdio>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {
namespace {

int RunPull(int argc, char** argv) {
  CLI::App app{"Download a model into the store: a URL, hf://ORG/REPO/FILE[@REV] (HF_TOKEN, HF_ENDPOINT), a "
               "NAME[:VERSION] from the manifest, or a NAME of the catalog (gemma3-1b, gemma4-e2b, ...). Interrupted "
               "downloads resume; the file is checked against its SHA-256 before it is installed"};
  app.name("gemlet pull");
  std::string what, store;
  FetchFlags f;
  app.add_option("WHAT", what, "URL, hf://ORG/REPO/FILE[@REV], NAME[:VERSION] or a catalog NAME")->required();
  app.add_option("--sha256", f.options.sha256, "the SHA-256 the file must have (64 hex digits)");
  app.add_option("--catalog", f.options.catalog,
                 "the catalog of names (default: $GEMLET_CATALOG, else STORE/catalog.json, else the built-in one)");
  app.add_flag("--trust-unverified", f.options.trust_unverified,
               "install a file no SHA-256 vouches for (no --sha256, manifest, catalog or hub digest)");
  app.add_option("--name", f.options.name, "install under this name (default: the file's name, or NAME)");
  app.add_flag("--no-mmproj{false}", f.options.with_mmproj,
               "a catalog model's vision/audio towers are pulled with it (as NAME-mmproj) unless this is given");
  app.add_option("--version", f.options.version, "install as this version (default: the manifest's, else the digest's first 12 digits)");
  AddStoreFlag(app, &store);
  AddFetchFlags(app, &f);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  f.options.store_dir = StoreDir(store);
  AttachProgress(&f);
  Result<PullResult> r = Pull(what, f.options);
  EndProgress();
  if (!r.ok()) return Fail(r.status());
  if (r->already_installed) {
    std::printf("%s %s is installed already: %s\n", r->name.c_str(), r->version.c_str(), r->path.c_str());
  } else {
    std::printf("installed %s %s (%s, sha256 %s): %s\n", r->name.c_str(), r->version.c_str(), HumanBytes(r->size).c_str(),
                r->sha256.c_str(), r->path.c_str());
  }
  if (r->mmproj) {
    const PullResult& t = *r->mmproj;
    std::printf("%s %s %s (%s): %s\n", t.already_installed ? "towers" : "installed towers", t.name.c_str(), t.version.c_str(),
                HumanBytes(t.size).c_str(), t.path.c_str());
  }
  // The first model pulled becomes the one run, chat, serve and the tasks use without -m.
  auto opened = OpenStore(store);
  if (!opened.ok()) return Fail(opened.status());
  Result<std::string> current = (*opened)->DefaultModel();
  if (current.ok() && current->empty()) {
    if (Status st = (*opened)->SetDefaultModel(r->name); !st.ok()) return Fail(st);
    std::printf("%s is the default model now ('gemlet default NAME' changes it)\n", r->name.c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("pull", "download a model into the store (URL, hf://, or a manifest NAME)", RunPull);

}  // namespace gemlet::cli
