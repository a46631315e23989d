// LoRA adapters in the public API: Engine::LoadAdapter, Adapter, and Session/Conversation::SetAdapters.
#include <cmath>
#include <filesystem>

#include "api/api_internal.h"
#include "gemlet/delta.hpp"
#include "model/lora.h"

namespace gemlet {

Adapter::Adapter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Adapter::~Adapter() = default;
const std::string& Adapter::path() const { return impl_->path; }
const std::string& Adapter::name() const { return impl_->name; }
const std::string& Adapter::sha256() const { return impl_->lora->identity(); }
float Adapter::alpha() const { return impl_->lora->alpha(); }
int Adapter::rank() const { return impl_->lora->max_rank(); }
int Adapter::projections() const { return static_cast<int>(impl_->lora->pairs().size()); }
uint64_t Adapter::bytes() const { return impl_->lora->tensor_bytes(); }

Result<std::shared_ptr<const Adapter>> Engine::LoadAdapter(const std::string& path, bool any_base) const {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  // The content's hash, not the path's: two files at one path over time are two adapters.
  Result<std::string> digest = delta::FileSha256(path);
  std::string identity = digest.ok() ? digest.value() : std::string();
  if (identity.empty()) {
    // Built without OpenSSL (no store): the engine's file identity rule (size, time, ends).
    identity = "file:" + std::to_string(file->file_size()) + ":" + path;
  }
  auto impl = std::make_unique<Adapter::Impl>();
  impl->engine = impl_->runtime;
  impl->path = path;
  Result<std::string> name = file->GetString("general.name");
  impl->name = name.ok() && !name.value().empty() ? name.value() : std::filesystem::path(path).stem().string();
  ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> lora,
                   LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file)), impl_->runtime->model(),
                                     std::move(identity), any_base));
  impl->lora = std::move(lora);
  return std::shared_ptr<const Adapter>(std::make_shared<Adapter>(std::move(impl)));
}

namespace api {

Result<std::shared_ptr<const LoraStack>> MakeLoraStack(const Engine& engine, std::span<const AdapterUse> adapters) {
  if (adapters.empty()) return std::shared_ptr<const LoraStack>();
  std::vector<LoraUse> uses;
  for (const AdapterUse& use : adapters) {
    if (!use.adapter) return Status::Error(StatusCode::kInvalidArgument, "an adapter in the list is null");
    if (use.adapter->impl().engine != engine.impl().runtime) {
      return Status::Error(StatusCode::kInvalidArgument,
                           "adapter '" + use.adapter->path() + "' was loaded for another engine (load it with this one)");
    }
    if (!std::isfinite(use.scale)) {
      return Status::Error(StatusCode::kInvalidArgument, "adapter '" + use.adapter->path() + "' has a non-finite scale");
    }
    uses.push_back({use.adapter->impl().lora, use.scale});
  }
  return std::shared_ptr<const LoraStack>(std::make_shared<LoraStack>(std::move(uses)));
}

}  // namespace api

Status Session::SetAdapters(std::span<const AdapterUse> adapters) {
  ASSIGN_OR_RETURN(std::shared_ptr<const LoraStack> stack, api::MakeLoraStack(*impl_->engine, adapters));
  impl_->session->SetAdapters(std::move(stack));
  impl_->adapters.assign(adapters.begin(), adapters.end());
  return Status::Ok();
}

const std::vector<AdapterUse>& Session::adapters() const { return impl_->adapters; }

}  // namespace gemlet
