// The C API's LoRA adapters: loading one for an engine, its facts, and the adapters a session or a
// conversation runs.
#include "api/gemlet_c_internal.h"

using namespace gemlet::capi;

namespace {

// The C list (adapters[i] at scales[i]; scales NULL: 1 each) as the C++ API takes it.
gemlet_status ToUses(const gemlet_adapter* const* adapters, const float* scales, size_t n,
                     std::vector<gemlet::AdapterUse>* out) {
  if (n > 0 && adapters == nullptr) return NullHandle("adapters");
  for (size_t i = 0; i < n; ++i) {
    if (adapters[i] == nullptr) return NullHandle("adapters[i]");
    out->push_back({adapters[i]->adapter, scales != nullptr ? scales[i] : 1.0f});
  }
  return GEMLET_OK;
}

gemlet_status UseAt(const std::vector<gemlet::AdapterUse>& uses, size_t index, gemlet_adapter** adapter, float* scale) {
  if (index >= uses.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT, "adapter index " + std::to_string(index) + " is out of range (" +
                                             std::to_string(uses.size()) + " adapters)");
  }
  if (adapter != nullptr) *adapter = new gemlet_adapter{uses[index].adapter};
  if (scale != nullptr) *scale = uses[index].scale;
  return GEMLET_OK;
}

}  // namespace

extern "C" {

gemlet_status gemlet_engine_load_adapter(const gemlet_engine* engine, const char* path, gemlet_adapter** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (path == nullptr) return NullHandle("path");
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    gemlet::Result<std::shared_ptr<const gemlet::Adapter>> a = engine->engine->LoadAdapter(path);
    if (!a.ok()) return Report(a.status());
    *out = new gemlet_adapter{std::move(a).value()};
    return GEMLET_OK;
  });
}

void gemlet_adapter_free(gemlet_adapter* adapter) { delete adapter; }
const char* gemlet_adapter_path(const gemlet_adapter* a) { return a != nullptr ? a->adapter->path().c_str() : ""; }
const char* gemlet_adapter_name(const gemlet_adapter* a) { return a != nullptr ? a->adapter->name().c_str() : ""; }
const char* gemlet_adapter_sha256(const gemlet_adapter* a) { return a != nullptr ? a->adapter->sha256().c_str() : ""; }
float gemlet_adapter_alpha(const gemlet_adapter* a) { return a != nullptr ? a->adapter->alpha() : 0.0f; }
int gemlet_adapter_rank(const gemlet_adapter* a) { return a != nullptr ? a->adapter->rank() : 0; }
int gemlet_adapter_projections(const gemlet_adapter* a) { return a != nullptr ? a->adapter->projections() : 0; }
uint64_t gemlet_adapter_bytes(const gemlet_adapter* a) { return a != nullptr ? a->adapter->bytes() : 0; }

gemlet_status gemlet_session_set_adapters(gemlet_session* session, const gemlet_adapter* const* adapters,
                                          const float* scales, size_t n) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    std::vector<gemlet::AdapterUse> uses;
    if (gemlet_status s = ToUses(adapters, scales, n, &uses); s != GEMLET_OK) return s;
    return Report(session->session->SetAdapters(uses));
  });
}

size_t gemlet_session_n_adapters(const gemlet_session* session) {
  return session != nullptr ? session->session->adapters().size() : 0;
}

gemlet_status gemlet_session_adapter_at(const gemlet_session* session, size_t index, gemlet_adapter** adapter, float* scale) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    return UseAt(session->session->adapters(), index, adapter, scale);
  });
}

gemlet_status gemlet_conversation_set_adapters(gemlet_conversation* conversation, const gemlet_adapter* const* adapters,
                                               const float* scales, size_t n) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    std::vector<gemlet::AdapterUse> uses;
    if (gemlet_status s = ToUses(adapters, scales, n, &uses); s != GEMLET_OK) return s;
    return Report(conversation->conversation->SetAdapters(uses));
  });
}

size_t gemlet_conversation_n_adapters(const gemlet_conversation* conversation) {
  return conversation != nullptr ? conversation->conversation->adapters().size() : 0;
}

gemlet_status gemlet_conversation_adapter_at(const gemlet_conversation* conversation, size_t index,
                                             gemlet_adapter** adapter, float* scale) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    return UseAt(conversation->conversation->adapters(), index, adapter, scale);
  });
}

}  // extern "C"
