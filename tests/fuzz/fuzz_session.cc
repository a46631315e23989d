// libFuzzer target for the files a session is resumed from: Session::LoadState (tokens and KV rows,
// versioned, checksummed, bound to the model file) and Conversation::Load (the messages as JSON), on
// the demo model. Any file loads or is refused with a message; a refused one leaves the session
// usable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_input_file.h"
#include "gemlet/gemlet.hpp"

namespace {
struct Loaded {
  std::shared_ptr<gemlet::Engine> engine;
  std::unique_ptr<gemlet::Session> session;
  std::unique_ptr<gemlet::Conversation> conversation;
};

Loaded& Demo() {
  static Loaded loaded = [] {
    Loaded l;
    gemlet::EngineOptions o;
    o.memory_pressure_path = "";
    l.engine = std::move(gemlet::Engine::Load(GEMLET_DEMO_MODEL, o)).value();
    gemlet::SessionOptions so;
    so.n_ctx = 64;
    l.session = std::move(gemlet::Session::Create(l.engine, so)).value();
    l.conversation = std::move(gemlet::Conversation::Create(l.engine)).value();
    return l;
  }();
  return loaded;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gemlet::fuzz::InputFile file(gemlet::fuzz::InputFilePath("session"));
  const std::string& where = file.path();
  const std::string path = gemlet::fuzz::WriteInputFile(where, data, size);
  if (path.empty()) return 0;
  Loaded& d = Demo();
  gemlet::Status state = d.session->LoadState(path);
  if (!state.ok() && state.message().empty()) std::abort();
  if (d.session->n_past() > d.session->n_ctx()) std::abort();
  gemlet::Status messages = d.conversation->Load(path);
  if (!messages.ok() && messages.message().empty()) std::abort();
  d.session->Reset();
  return 0;
}
