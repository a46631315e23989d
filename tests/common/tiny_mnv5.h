// A Gemma 3n checkpoint with an image tower, for tests until the HF golden (gemma3n_image_audio, made by
// .mmref/mm3n_goldens.py) exists: shared/testdata/hf-mm/gemma3n_audio's text decoder and audio tower,
// its timm stand-in vision tower replaced by a MobileNet-V5 of the golden's tiny arch (TINY_MNV5: the
// block kinds of mobilenetv5_300m_enc at reduced width and depth) under timm's tensor names, and a
// vision embedder. Random weights from a seed; HF's layout and shapes (timm's builder rules for the
// channel counts). Also a PNG writer (stored deflate, no library) for test images.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gemlet::test {

// mm3n_goldens.py's TINY_MNV5, in timm's arch-string form.
inline const std::vector<std::vector<std::string>>& TinyMnv5Arch() {
  static const std::vector<std::vector<std::string>> arch = {
      {"er_r1_k3_s2_e4_c8", "er_r1_k3_s1_e4_c8"},
      {"uir_r1_a3_k5_s2_e6_c16", "uir_r1_a5_k0_s1_e4_c16", "uir_r1_a3_k0_s1_e4_c16"},
      {"uir_r1_a5_k5_s2_e6_c24", "uir_r1_a5_k0_s1_e4_c24", "uir_r1_a0_k0_s1_e1_c24", "mqa_r1_k3_h2_v2_s1_d8_c24",
       "uir_r1_a0_k0_s1_e2_c24", "mqa_r1_k3_h2_v2_s1_d8_c24", "uir_r1_a0_k0_s1_e2_c24"},
      {"uir_r1_a5_k5_s2_e6_c32", "mqa_r1_k3_h2_s1_d12_c32", "uir_r1_a0_k0_s1_e2_c32", "mqa_r1_k3_h2_s1_d12_c32",
       "uir_r1_a0_k0_s1_e2_c32"}};
  return arch;
}

struct Gemma3nImageCheckpoint {
  int image_size = 128;   // the processor's square
  int soft_tokens = 16;   // vision_soft_tokens_per_image: the fusion adapter's grid, squared
  int stem = 8;
  int vision_hidden = 2048;  // timm's MobileNetV5Encoder num_features
  uint32_t seed = 3105;
};

namespace mnv5_detail {

struct Raw {
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::map<std::string, std::string> Options(const std::string& spec, std::string* kind) {
  std::map<std::string, std::string> o;
  size_t at = spec.find('_');
  *kind = spec.substr(0, at);
  while (at != std::string::npos) {
    const size_t next = spec.find('_', at + 1);
    const std::string part = spec.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    // "a3" -> a: "3"; the key is the leading letters.
    size_t k = 0;
    while (k < part.size() && std::isalpha(static_cast<unsigned char>(part[k]))) ++k;
    o[part.substr(0, k)] = part.substr(k);
    at = next;
  }
  return o;
}

// timm's make_divisible(v, 8).
inline int64_t MakeDivisible(double v) {
  int64_t n = std::max<int64_t>(8, static_cast<int64_t>(v + 4) / 8 * 8);
  if (static_cast<double>(n) < 0.9 * v) n += 8;
  return n;
}

class Maker {
 public:
  explicit Maker(uint32_t seed) : rng_(seed) {}
  // >= 2-D: N(0, 1) / sqrt(fan_in), fan_in = prod(shape[1:]) (the goldens' rule).
  void Weight(const std::string& name, std::vector<int64_t> shape) {
    int64_t fan = 1, n = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      n *= shape[i];
      if (i > 0) fan *= shape[i];
    }
    Put(name, std::move(shape), n, 0.0f, 1.0f / std::sqrt(static_cast<float>(fan)));
  }
  // 1-D: base + N(0, 0.3^2) (norms 1 + ..., biases and layer scales 0 + ...).
  void Vector(const std::string& name, int64_t n, float base) { Put(name, {n}, n, base, 0.3f); }
  std::map<std::string, Raw>& tensors() { return tensors_; }

 private:
  void Put(const std::string& name, std::vector<int64_t> shape, int64_t n, float base, float scale) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = base + scale * normal(rng_);
    Raw r;
    r.shape = std::move(shape);
    r.bytes.resize(v.size() * 4);
    std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
    tensors_[name] = std::move(r);
  }
  std::mt19937 rng_;
  std::map<std::string, Raw> tensors_;
};

// The vision tower and embedder tensors for `arch`; returns the channels of each stage's output.
inline std::vector<int64_t> AddTower(Maker& m, const Gemma3nImageCheckpoint& spec, int64_t text_hidden, int64_t vocab) {
  const std::string t = "model.vision_tower.timm_model.";
  m.Weight(t + "conv_stem.conv.weight", {spec.stem, 3, 3, 3});
  m.Vector(t + "conv_stem.conv.bias", spec.stem, 0.0f);
  m.Vector(t + "conv_stem.bn.weight", spec.stem, 1.0f);
  int64_t in = spec.stem;
  std::vector<int64_t> stage_out;
  const auto& arch = TinyMnv5Arch();
  for (size_t s = 0; s < arch.size(); ++s) {
    for (size_t i = 0; i < arch[s].size(); ++i) {
      std::string kind;
      auto o = Options(arch[s][i], &kind);
      const std::string p = t + "blocks." + std::to_string(s) + "." + std::to_string(i) + ".";
      const int64_t out = std::stoi(o["c"]);
      if (kind == "er") {
        const int64_t mid = MakeDivisible(static_cast<double>(in) * std::stod(o["e"]));
        const int64_t k = std::stoi(o["k"]);
        m.Weight(p + "conv_exp.weight", {mid, in, k, k});
        m.Vector(p + "bn1.weight", mid, 1.0f);
        m.Weight(p + "conv_pwl.weight", {out, mid, 1, 1});
        m.Vector(p + "bn2.weight", out, 1.0f);
      } else if (kind == "uir") {
        const int64_t a = std::stoi(o["a"]), k = std::stoi(o["k"]);
        const int64_t mid = MakeDivisible(static_cast<double>(in) * std::stod(o["e"]));
        if (a > 0) {
          m.Weight(p + "dw_start.conv.weight", {in, 1, a, a});
          m.Vector(p + "dw_start.bn.weight", in, 1.0f);
        }
        m.Weight(p + "pw_exp.conv.weight", {mid, in, 1, 1});
        m.Vector(p + "pw_exp.bn.weight", mid, 1.0f);
        if (k > 0) {
          m.Weight(p + "dw_mid.conv.weight", {mid, 1, k, k});
          m.Vector(p + "dw_mid.bn.weight", mid, 1.0f);
        }
        m.Weight(p + "pw_proj.conv.weight", {out, mid, 1, 1});
        m.Vector(p + "pw_proj.bn.weight", out, 1.0f);
        m.Vector(p + "layer_scale.gamma", out, 0.0f);
      } else {  // mqa
        const int64_t h = std::stoi(o["h"]), d = std::stoi(o["d"]), k = std::stoi(o["k"]);
        m.Vector(p + "norm.weight", in, 1.0f);
        m.Weight(p + "attn.query.proj.weight", {h * d, in, 1, 1});
        if (o.count("v") != 0 && std::stoi(o["v"]) > 1) {
          for (const char* kv : {"key", "value"}) {
            m.Weight(p + "attn." + kv + ".down_conv.weight", {in, 1, k, k});
            m.Vector(p + "attn." + kv + ".norm.weight", in, 1.0f);
          }
        }
        m.Weight(p + "attn.key.proj.weight", {d, in, 1, 1});
        m.Weight(p + "attn.value.proj.weight", {d, in, 1, 1});
        m.Weight(p + "attn.output.proj.weight", {out, h * d, 1, 1});
        m.Vector(p + "layer_scale.gamma", out, 0.0f);
      }
      in = out;
    }
    stage_out.push_back(in);
  }
  const int64_t fused = stage_out[stage_out.size() - 2] + stage_out.back();
  const int64_t mid = MakeDivisible(static_cast<double>(fused) * 2.0);
  m.Weight(t + "msfa.ffn.pw_exp.conv.weight", {mid, fused, 1, 1});
  m.Vector(t + "msfa.ffn.pw_exp.bn.weight", mid, 1.0f);
  m.Weight(t + "msfa.ffn.pw_proj.conv.weight", {spec.vision_hidden, mid, 1, 1});
  m.Vector(t + "msfa.ffn.pw_proj.bn.weight", spec.vision_hidden, 1.0f);
  m.Vector(t + "msfa.norm.weight", spec.vision_hidden, 1.0f);
  const std::string e = "model.embed_vision.";
  m.Weight(e + "embedding.weight", {vocab, spec.vision_hidden});
  m.Vector(e + "hard_embedding_norm.weight", spec.vision_hidden, 1.0f);
  m.Vector(e + "soft_embedding_norm.weight", spec.vision_hidden, 1.0f);
  m.Weight(e + "embedding_projection.weight", {text_hidden, spec.vision_hidden});
  return stage_out;
}

}  // namespace mnv5_detail

// Writes dir/{config.json, model.safetensors, image_processor_config.json}; false (with a gtest-free
// message in *error) when the source checkpoint cannot be read.
inline bool WriteGemma3nImageCheckpoint(const std::string& dir, const Gemma3nImageCheckpoint& spec, std::string* error) {
  namespace fs = std::filesystem;
  using mnv5_detail::Raw;
  const std::string src = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma3n_audio";
  std::ifstream in(src + "/model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) {
    *error = "cannot read " + src + "/model.safetensors";
    return false;
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
  mnv5_detail::Maker maker(spec.seed);
  auto& tensors = maker.tensors();
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__" || name.rfind("model.vision_tower.", 0) == 0 || name.rfind("model.embed_vision.", 0) == 0) {
      continue;
    }
    Raw r;
    r.dtype = info["dtype"].get<std::string>();
    r.shape = info["shape"].get<std::vector<int64_t>>();
    const size_t begin = info["data_offsets"][0].get<size_t>(), end = info["data_offsets"][1].get<size_t>();
    r.bytes.assign(bytes.begin() + 8 + header_len + begin, bytes.begin() + 8 + header_len + end);
    tensors[name] = std::move(r);
  }
  std::ifstream cin(src + "/config.json");
  nlohmann::json config = nlohmann::json::parse(cin);
  const int64_t text_hidden = config["text_config"]["hidden_size"].get<int64_t>();
  nlohmann::json vision = {{"architecture", "mobilenetv5_300m_enc"}, {"hidden_size", spec.vision_hidden},
                           {"model_type", "gemma3n_vision"},        {"rms_norm_eps", 1e-6},
                           {"vocab_offset", 384},                   {"vocab_size", 64},
                           {"do_pooling", false}};
  const int side = static_cast<int>(std::lround(std::sqrt(spec.soft_tokens)));
  vision["model_args"] = {{"msfa_output_resolution", side}};
  config["vision_config"] = vision;
  config["vision_soft_tokens_per_image"] = spec.soft_tokens;
  mnv5_detail::AddTower(maker, spec, text_hidden, 64);

  nlohmann::json out_header = nlohmann::json::object();
  out_header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    out_header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = out_header.dump();
  while (text.size() % 8 != 0) text += ' ';
  fs::create_directories(dir);
  std::ofstream st(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = text.size();
  st.write(reinterpret_cast<const char*>(&len), 8);
  st << text;
  for (const auto& [name, t] : tensors) st.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  std::ofstream(dir + "/config.json") << config.dump(2);
  // SiglipImageProcessorFast as Gemma 3n's processor saves it: a square, bilinear, no normalising.
  const nlohmann::json processor = {{"image_processor_type", "SiglipImageProcessorFast"},
                                    {"size", {{"height", spec.image_size}, {"width", spec.image_size}}},
                                    {"resample", 2},
                                    {"do_rescale", true},
                                    {"rescale_factor", 1.0 / 255.0},
                                    {"do_normalize", false},
                                    {"image_mean", {0.5, 0.5, 0.5}},
                                    {"image_std", {0.5, 0.5, 0.5}}};
  std::ofstream(dir + "/image_processor_config.json") << processor.dump(2);
  return true;
}

// An 8-bit RGB PNG of rgb ([h, w, 3]) with stored (uncompressed) deflate blocks.
inline std::vector<uint8_t> PngRgb(int w, int h, const std::vector<uint8_t>& rgb) {
  std::vector<uint32_t> table(256);
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const auto be32 = [](std::vector<uint8_t>& v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
  };
  const auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    be32(out, static_cast<uint32_t>(data.size()));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    uint32_t crc = 0xffffffffu;
    for (uint8_t b : body) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
    out.insert(out.end(), body.begin(), body.end());
    be32(out, crc ^ 0xffffffffu);
  };
  std::vector<uint8_t> ihdr;
  be32(ihdr, static_cast<uint32_t>(w));
  be32(ihdr, static_cast<uint32_t>(h));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  chunk("IHDR", ihdr);
  std::vector<uint8_t> raw;
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), rgb.begin() + static_cast<ptrdiff_t>(y) * w * 3, rgb.begin() + static_cast<ptrdiff_t>(y + 1) * w * 3);
  }
  std::vector<uint8_t> z = {0x78, 0x01};
  for (size_t at = 0; at < raw.size(); at += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    z.push_back(at + n == raw.size() ? 1 : 0);
    z.insert(z.end(), {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(~n), static_cast<uint8_t>(~n >> 8)});
    z.insert(z.end(), raw.begin() + static_cast<ptrdiff_t>(at), raw.begin() + static_cast<ptrdiff_t>(at + n));
  }
  uint32_t a = 1, b = 0;
  for (uint8_t v : raw) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  be32(z, (b << 16) | a);
  chunk("IDAT", z);
  chunk("IEND", {});
  return out;
}

// A test picture: gradients, a disc and a stripe, so that every part of the grid differs.
inline std::vector<uint8_t> TestPicture(int w, int h, int variant = 0) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = rgb.data() + (static_cast<size_t>(y) * w + x) * 3;
      const double dx = x - w * (0.4 + 0.2 * variant), dy = y - h * 0.55;
      const bool disc = dx * dx + dy * dy < 0.05 * w * h;
      p[0] = disc ? 230 : static_cast<uint8_t>(255 * x / std::max(1, w - 1));
      p[1] = disc ? 30 : static_cast<uint8_t>(255 * y / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(x / 4.0 + y / 6.0 + variant));
    }
  }
  return rgb;
}

}  // namespace gemlet::test
