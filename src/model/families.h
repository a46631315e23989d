// The registry of model families: one line per general.architecture value.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"

namespace gemlet {

using ModelLoader = Result<std::unique_ptr<Model>> (*)(std::shared_ptr<const GgufFile>);

struct ModelFamily {
  const char* arch;
  ModelLoader load;
};

const std::vector<ModelFamily>& ModelFamilies();

// One per family file under model/gemma/.
Result<std::unique_ptr<Model>> LoadGemma(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadGemma2(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadGemma3(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadGemma3n(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadGemma4(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadGemma4Assistant(std::shared_ptr<const GgufFile> gguf);  // a drafter (model/assistant.h)
// Not a Gemma: plays back the answers written into its file (tests of tool calls and thinking).
Result<std::unique_ptr<Model>> LoadScripted(std::shared_ptr<const GgufFile> gguf);

}  // namespace gemlet
