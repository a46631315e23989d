// Writes llama.cpp's logits for every position of a token sequence, with LoRA adapters applied
// through its public API (llama.h), as the reference for tests/convert/lora_llamacpp_test.cc.
// Built outside the repository against a llama.cpp checkout (see make_llamacpp_logits.sh):
//   llama_logits MODEL.gguf IDS_CSV OUT.f32 [ADAPTER.gguf:SCALE ...]
// OUT.f32 is [T, vocab] float32, row t the logits after ids[0..t].
#include <llama.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::vector<llama_token> ParseIds(const std::string& csv) {
  std::vector<llama_token> ids;
  size_t start = 0;
  while (start < csv.size()) {
    size_t comma = csv.find(',', start);
    if (comma == std::string::npos) comma = csv.size();
    ids.push_back(static_cast<llama_token>(std::stol(csv.substr(start, comma - start))));
    start = comma + 1;
  }
  return ids;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "llama_logits: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: llama_logits MODEL.gguf IDS_CSV OUT.f32 [ADAPTER.gguf:SCALE ...]");
  const std::vector<llama_token> ids = ParseIds(argv[2]);
  if (ids.empty()) return Fail("no token ids");

  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (model == nullptr) return Fail(std::string("cannot load ") + argv[1]);

  std::vector<llama_adapter_lora*> adapters;
  std::vector<float> scales;
  for (int a = 4; a < argc; ++a) {
    const std::string spec = argv[a];
    const size_t colon = spec.rfind(':');
    const std::string path = colon == std::string::npos ? spec : spec.substr(0, colon);
    scales.push_back(colon == std::string::npos ? 1.0f : std::stof(spec.substr(colon + 1)));
    llama_adapter_lora* adapter = llama_adapter_lora_init(model, path.c_str());
    if (adapter == nullptr) return Fail("cannot load adapter " + path);
    adapters.push_back(adapter);
  }

  llama_context_params context_params = llama_context_default_params();
  context_params.n_ctx = static_cast<uint32_t>(ids.size() + 16);
  context_params.n_batch = static_cast<uint32_t>(ids.size());
  context_params.n_ubatch = static_cast<uint32_t>(ids.size());
  context_params.n_threads = 2;
  context_params.n_threads_batch = 2;
  // An F32 cache, and no flash attention: its CPU kernel rounds the queries to F16, which puts
  // llama.cpp 0.04 from HF on gemma1_2b_like_mqa where its plain attention is 0.0096 (the distance
  // shared/testdata/gguf's README records).
  context_params.type_k = GGML_TYPE_F32;
  context_params.type_v = GGML_TYPE_F32;
  context_params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* context = llama_init_from_model(model, context_params);
  if (context == nullptr) return Fail("cannot create a context");
  if (!adapters.empty() &&
      llama_set_adapters_lora(context, adapters.data(), adapters.size(), scales.data()) != 0) {
    return Fail("cannot set the adapters");
  }

  llama_batch batch = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
  for (size_t t = 0; t < ids.size(); ++t) {
    batch.token[t] = ids[t];
    batch.pos[t] = static_cast<llama_pos>(t);
    batch.n_seq_id[t] = 1;
    batch.seq_id[t][0] = 0;
    batch.logits[t] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(ids.size());
  if (llama_decode(context, batch) != 0) return Fail("llama_decode failed");

  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = std::fopen(argv[3], "wb");
  if (out == nullptr) return Fail(std::string("cannot write ") + argv[3]);
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* row = llama_get_logits_ith(context, static_cast<int32_t>(t));
    if (row == nullptr || std::fwrite(row, sizeof(float), vocab, out) != static_cast<size_t>(vocab)) {
      return Fail("cannot read or write the logits of row " + std::to_string(t));
    }
  }
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(context);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
