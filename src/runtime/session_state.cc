// Session state files: suspend a session (its tokens and the KV rows it holds) and resume it with
// nothing evaluated again.
//
// Layout (little-endian): "GMLTSESS", u32 version, u64 file size, the model identity, the KV type,
// n_past, the layer layout (per layer: heads, key and value widths, window, source), the tokens,
// the caller's extra bytes, [version 2: the media among the tokens: their count, then each one's
// position, kind, n_tokens, n_embd, two_way, end token, content hash and embeddings], then per layer that
// stores rows: its first saved position, the count, and the K and V rows in position order; last a
// 64-bit checksum of everything before it. A session without media is written as version 1, which
// every gemlet reads.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <algorithm>

#include "runtime/media_prompt.h"
#include "runtime/session.h"

namespace gemlet::runtime {

namespace {

constexpr char kMagic[8] = {'G', 'M', 'L', 'T', 'S', 'E', 'S', 'S'};
constexpr uint32_t kVersion = 1;       // text only
constexpr uint32_t kMediaVersion = 2;  // with media

// The KV type as the file stores it (version 1's codes, fixed: not the DType's values).
uint32_t KvTypeCode(DType type) {
  switch (type) {
    case DType::kF16: return 1;
    case DType::kQ8_0: return 2;
    case DType::kQ4_0: return 3;
    default: return 0;  // f32
  }
}
DType KvTypeOfCode(uint32_t code) {
  return code == 1 ? DType::kF16 : code == 2 ? DType::kQ8_0 : code == 3 ? DType::kQ4_0 : DType::kF32;
}

// A checksum that reads 8 bytes a step (a 2,000-token state is tens of MiB): multiply-xorshift
// over little-endian words, the tail byte by byte.
uint64_t Checksum(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

class Writer {
 public:
  template <class T>
  void Put(T v) { Bytes(&v, sizeof v); }
  void Bytes(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  }
  void String(const std::string& s) {
    Put(static_cast<uint64_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  bool Get(T* v) { return Bytes(v, sizeof *v); }
  bool Bytes(void* out, size_t n) {
    if (n > n_ - at_) return false;
    std::memcpy(out, p_ + at_, n);
    at_ += n;
    return true;
  }
  const uint8_t* Take(size_t n) {
    if (n > n_ - at_) return nullptr;
    const uint8_t* p = p_ + at_;
    at_ += n;
    return p;
  }
  bool String(std::string* s) {
    uint64_t len = 0;
    if (!Get(&len) || len > n_ - at_) return false;
    s->assign(reinterpret_cast<const char*>(p_ + at_), static_cast<size_t>(len));
    at_ += static_cast<size_t>(len);
    return true;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

}  // namespace

Status Session::SaveState(const std::string& path, const std::string& extra) const {
  if (rings_stale_) return Status::Error("the session was stopped mid-evaluation: evaluate once more before saving it");
  const KvCache& c = *cache_;
  Writer w;
  w.Bytes(kMagic, sizeof kMagic);
  w.Put(media_.empty() ? kVersion : kMediaVersion);
  w.Put(uint64_t{0});  // the file size, filled in below
  w.String(StateIdentity());
  w.Put(KvTypeCode(c.type()));
  w.Put(static_cast<int32_t>(c.n_past()));
  const std::vector<KvLayerSpec> layout = engine_->model().KvLayout();
  w.Put(static_cast<uint32_t>(layout.size()));
  for (const KvLayerSpec& s : layout) {
    for (int v : {s.n_kv_heads, s.head_dim_k, s.head_dim_v, s.window, s.source}) w.Put(static_cast<int32_t>(v));
  }
  w.Put(static_cast<uint64_t>(history_.size()));
  w.Bytes(history_.data(), history_.size() * sizeof(int32_t));
  w.String(extra);
  if (!media_.empty()) {
    // The embeddings themselves: a resumed session can evaluate its history again (a deep rollback,
    // dropped turns) and recognise the same image in a later prompt.
    w.Put(static_cast<uint32_t>(media_.size()));
    for (const MediaSpan& span : media_) {
      const EncodedMedia& m = *span.media;
      w.Put(static_cast<int32_t>(span.position));
      w.Put(static_cast<uint32_t>(m.kind));
      w.Put(static_cast<int32_t>(m.n_tokens));
      w.Put(static_cast<int32_t>(m.n_embd));
      w.Put(static_cast<uint8_t>(m.two_way));
      w.Put(static_cast<int32_t>(m.end_token));
      w.String(m.content_hash);
      w.Bytes(m.embeddings.data(), m.embeddings.size() * sizeof(float));
    }
  }
  for (size_t l = 0; l < layout.size(); ++l) {
    if (layout[l].source >= 0) continue;
    const int layer = static_cast<int>(l);
    const int first = c.OldestHeld(layer), count = c.n_past() - first;
    w.Put(static_cast<int32_t>(first));
    w.Put(static_cast<int32_t>(count));
    for (int p = first; p < c.n_past(); ++p) w.Bytes(c.KeyRow(layer, p), c.KeyRowBytes(layer));
    for (int p = first; p < c.n_past(); ++p) w.Bytes(c.ValueRow(layer, p), c.ValueRowBytes(layer));
  }
  const uint64_t size = w.out.size() + sizeof(uint64_t);
  std::memcpy(w.out.data() + sizeof kMagic + sizeof kVersion, &size, sizeof size);
  w.Put(Checksum(w.out.data(), w.out.size()));

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Error("cannot write '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < w.out.size()) {
    const ssize_t n = ::write(fd, w.out.data() + done, w.out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Error("cannot write '" + path + "': " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::Error("cannot write '" + path + "': " + std::strerror(e));
  }
  return Status::Ok();
}

Result<std::string> Session::LoadState(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::Error("cannot open '" + path + "'");
  std::vector<uint8_t> data(static_cast<size_t>(std::max<std::streamoff>(0, in.tellg())));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()))) {
    return Status::Error("cannot read '" + path + "'");
  }
  const std::string what = "'" + path + "' ";
  if (data.size() < sizeof kMagic + 4 + 8 + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return Status::Error(what + "is not a saved gemlet session");
  }
  Reader r(data.data(), data.size() - sizeof(uint64_t));
  char magic[8];
  uint32_t version = 0;
  uint64_t size = 0, sum = 0;
  r.Bytes(magic, 8);
  r.Get(&version);
  r.Get(&size);
  if (version != kVersion && version != kMediaVersion) {
    return Status::Error(what + "is a session of format " + std::to_string(version) + ", not " +
                         std::to_string(kVersion) + " or " + std::to_string(kMediaVersion));
  }
  if (size != data.size()) return Status::Error(what + "is truncated or damaged (" + std::to_string(data.size()) + " bytes of " + std::to_string(size) + ")");
  std::memcpy(&sum, data.data() + data.size() - sizeof sum, sizeof sum);
  if (sum != Checksum(data.data(), data.size() - sizeof sum)) return Status::Error(what + "is damaged (its checksum does not match)");
  std::string identity, extra;
  uint32_t type = 0, n_layers = 0;
  int32_t n_past = 0;
  if (!r.String(&identity) || !r.Get(&type) || !r.Get(&n_past) || !r.Get(&n_layers)) return Status::Error(what + "is damaged");
  if (identity != StateIdentity()) {
    // The K/V depend on the adapters as much as on the base: a state saved under others is stale.
    const size_t lora_at = identity.find(kLoraIdentityTag);
    if (identity.substr(0, lora_at) == engine_->identity()) {
      return Status::Error(what + "was saved " +
                           (lora_at == std::string::npos ? std::string("without LoRA adapters")
                                                         : "with other LoRA adapters or scales") +
                           " than this session runs; set the same adapters to resume it");
    }
    return Status::Error(what + "was saved with another model file (or another version of it); it cannot be resumed here");
  }
  if (type != KvTypeCode(cache_->type())) {
    return Status::Error(what + "holds a " + KvTypeName(KvTypeOfCode(type)) + " KV cache; this session's is " +
                         KvTypeName(cache_->type()));
  }
  const std::vector<KvLayerSpec> layout = engine_->model().KvLayout();
  if (n_layers != layout.size()) return Status::Error(what + "has another layer layout");
  for (const KvLayerSpec& s : layout) {
    for (int v : {s.n_kv_heads, s.head_dim_k, s.head_dim_v, s.window, s.source}) {
      int32_t got = 0;
      if (!r.Get(&got) || got != v) return Status::Error(what + "has another layer layout");
    }
  }
  uint64_t n_tokens = 0;
  if (!r.Get(&n_tokens) || n_tokens != static_cast<uint64_t>(n_past) || n_past < 0) return Status::Error(what + "is damaged");
  if (n_past > cache_->n_ctx()) {
    return Status::Error(what + "holds " + std::to_string(n_past) + " tokens; this session's context is " +
                         std::to_string(cache_->n_ctx()));
  }
  std::vector<int32_t> tokens(static_cast<size_t>(n_past));
  if (!r.Bytes(tokens.data(), tokens.size() * sizeof(int32_t)) || !r.String(&extra)) return Status::Error(what + "is damaged");
  std::vector<MediaSpan> media;
  if (version == kMediaVersion) {
    uint32_t n_media = 0;
    if (!r.Get(&n_media) || n_media > static_cast<uint32_t>(n_past)) return Status::Error(what + "is damaged");
    for (uint32_t i = 0; i < n_media; ++i) {
      auto m = std::make_shared<EncodedMedia>();
      int32_t position = 0, n_tokens = 0, n_embd = 0, end_token = -1;
      uint32_t kind = 0;
      uint8_t two_way = 0;
      if (!r.Get(&position) || !r.Get(&kind) || !r.Get(&n_tokens) || !r.Get(&n_embd) || !r.Get(&two_way) ||
          !r.Get(&end_token) ||
          !r.String(&m->content_hash) || kind > 1 || n_tokens <= 0 || n_tokens > n_past || n_embd != engine_->config().d_model) {
        return Status::Error(what + "is damaged");
      }
      m->kind = static_cast<MediaKind>(kind);
      m->n_tokens = n_tokens;
      m->n_embd = n_embd;
      m->two_way = two_way != 0;
      m->end_token = end_token;
      m->embeddings.resize(static_cast<size_t>(n_tokens) * static_cast<size_t>(n_embd));
      if (!r.Bytes(m->embeddings.data(), m->embeddings.size() * sizeof(float))) return Status::Error(what + "is damaged");
      media.push_back({position, std::move(m)});
    }
    if (!CheckMediaSpans(*engine_, media, n_past).ok()) return Status::Error(what + "is damaged (its media)");
  }
  // Every layer's rows are checked before any is written: a refused file changes nothing.
  struct Rows {
    int layer, first, count;
    const uint8_t *k, *v;
  };
  std::vector<Rows> rows;
  int valid_from = 0;
  for (size_t l = 0; l < layout.size(); ++l) {
    if (layout[l].source >= 0) continue;
    const int layer = static_cast<int>(l);
    int32_t first = 0, count = 0;
    if (!r.Get(&first) || !r.Get(&count) || first < 0 || count < 0 || first + count != n_past) return Status::Error(what + "is damaged");
    // A smaller ring keeps the newest rows only; every layer must still hold the window the next
    // position attends to.
    const int cap = cache_->capacity(layer), keep = std::min(count, cap);
    const int window = layout[l].window > 0 ? layout[l].window : n_past + 1;
    if (keep < std::min(window - 1, n_past)) return Status::Error(what + "holds too few rows for this session's cache");
    const uint8_t* k = r.Take(static_cast<size_t>(count) * cache_->KeyRowBytes(layer));
    const uint8_t* v = r.Take(static_cast<size_t>(count) * cache_->ValueRowBytes(layer));
    if (k == nullptr || v == nullptr) return Status::Error(what + "is damaged");
    const int skip = count - keep;
    rows.push_back({layer, first + skip, keep, k + static_cast<size_t>(skip) * cache_->KeyRowBytes(layer),
                    v + static_cast<size_t>(skip) * cache_->ValueRowBytes(layer)});
    if (layout[l].window > 0 && first + skip > 0) valid_from = std::max(valid_from, first + skip);
  }
  cache_->Clear();
  for (const Rows& x : rows) {
    for (int i = 0; i < x.count; ++i) {
      std::memcpy(cache_->KeyRow(x.layer, x.first + i), x.k + static_cast<size_t>(i) * cache_->KeyRowBytes(x.layer),
                  cache_->KeyRowBytes(x.layer));
      std::memcpy(cache_->ValueRow(x.layer, x.first + i), x.v + static_cast<size_t>(i) * cache_->ValueRowBytes(x.layer),
                  cache_->ValueRowBytes(x.layer));
    }
  }
  cache_->SetPast(n_past);
  cache_->SetRingValidFrom(valid_from);
  history_ = std::move(tokens);
  media_ = std::move(media);
  rings_stale_ = false;
  return extra;
}

}  // namespace gemlet::runtime
