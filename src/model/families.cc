// The family table: adding a model family is one file under gemma/ and one line here.
#include "model/families.h"

namespace gemlet {

const std::vector<ModelFamily>& ModelFamilies() {
  static const std::vector<ModelFamily> families = {
      {"gemma", LoadGemma},
      {"gemma2", LoadGemma2},
      {"gemma3", LoadGemma3},
      {"gemma3n", LoadGemma3n},
      {"gemma4", LoadGemma4},
      {"gemma4-assistant", LoadGemma4Assistant},
      {"gemlet-scripted", LoadScripted},  // a test double (scripted.cc)
  };
  return families;
}

}  // namespace gemlet
