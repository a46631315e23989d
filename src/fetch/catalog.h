// The catalog: short names ("gemma3-1b") for files on the Hugging Face hub or the web, so that
// `gemlet pull NAME` works without a manifest. Read at run time (an override file) or built in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gemlet/fetch.hpp"

namespace gemlet::fetch {

struct CatalogEntry {
  std::string name;
  std::string source;  // hf://ORG/REPO/FILE[@REV] or an http(s) URL
  std::string sha256;  // "" unless pinned (hf:// sources get theirs from the hub)
  std::string summary;
  // The entry holding this model's vision/audio towers (llama.cpp mmproj), pulled with it and
  // installed as NAME-mmproj, the name run/chat/serve look for beside NAME; "" for none.
  std::string mmproj;
};

struct Catalog {
  std::string where;  // the file it was read from, or "the built-in catalog"
  std::vector<CatalogEntry> entries;
  const CatalogEntry* Find(std::string_view name) const;
  std::string Names() const;  // "gemma3-1b, gemma3-4b, ..."
};

Result<Catalog> ParseCatalog(std::string_view text, const std::string& where);

// options.catalog, else $GEMLET_CATALOG, else STORE_DIR/catalog.json when it exists, else the
// catalog built in.
Result<Catalog> LoadCatalog(const FetchOptions& options, const std::string& store_dir);

}  // namespace gemlet::fetch
