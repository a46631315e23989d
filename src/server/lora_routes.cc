// The server's LoRA adapters: which ones a request runs (its "lora" list or the server's scales),
// and llama-server's GET / POST /lora-adapters.
#include <nlohmann/json.hpp>

#include "server/admission.h"
#include "server/server_impl.h"

namespace gemlet {

using json = nlohmann::json;

Result<std::vector<AdapterUse>> Server::Impl::RequestAdapters(const std::vector<std::shared_ptr<const Adapter>>& loaded,
                                                              const server::CompletionRequest& r) {
  std::vector<float> scales;
  if (r.lora) {
    scales.assign(loaded.size(), 0.0f);  // llama-server: adapters a request does not list run at 0
    for (const auto& [id, scale] : *r.lora) {
      if (id < 0 || static_cast<size_t>(id) >= loaded.size()) {
        return Status::Error("'lora' names adapter " + std::to_string(id) + ", but the server has " +
                             std::to_string(loaded.size()) + (loaded.size() == 1 ? " (id 0)" : " (ids from 0)"));
      }
      scales[static_cast<size_t>(id)] = scale;
    }
  } else {
    std::lock_guard<std::mutex> lock(adapter_mutex);
    scales = adapter_scales;
  }
  std::vector<AdapterUse> uses;
  for (size_t i = 0; i < loaded.size() && i < scales.size(); ++i) {
    if (scales[i] != 0.0f) uses.push_back({loaded[i], scales[i]});  // scale 0 adds nothing: leave it out
  }
  return uses;
}

void Server::Impl::AddLoraRoutes() {
  Get("/lora-adapters", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    std::lock_guard<std::mutex> lock(adapter_mutex);
    for (size_t i = 0; i < options.adapters.size(); ++i) {
      list.push_back({{"id", i}, {"path", options.adapters[i].path}, {"scale", adapter_scales[i]}});
    }
    res.set_content(list.dump(), server::kJson);
  });
  Post("/lora-adapters", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = server::ParseBody(req.body, options.max_body_bytes, &body)) return server::SendError(res, *e);
    std::vector<std::pair<int, float>> list;
    if (auto e = server::ParseLoraList(body, "body", &list)) return server::SendError(res, *e);
    std::lock_guard<std::mutex> lock(adapter_mutex);
    std::vector<float> scales(options.adapters.size(), 0.0f);  // as llama-server: unlisted ones go to 0
    for (const auto& [id, scale] : list) {
      if (static_cast<size_t>(id) >= scales.size()) {
        return server::SendError(res, server::MakeError(400, "no adapter has id " + std::to_string(id) + " (the server has " +
                                                                 std::to_string(scales.size()) + ")"));
      }
      scales[static_cast<size_t>(id)] = scale;
    }
    adapter_scales = std::move(scales);
    res.set_content(json({{"success", true}}).dump(), server::kJson);
  });
}

}  // namespace gemlet
