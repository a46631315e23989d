// The delta format: diff + apply rebuild NEW byte for byte on real GGUFs (synth, quantize) and on
// hand-made ones (renames, odd padding), and every bad input is refused with nothing left behind.
#include "store/delta.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gemlet/tools.hpp"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "store/sha256.h"

namespace gemlet::store {
namespace {

namespace fs = std::filesystem;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
std::string Digest(const std::string& path) {
  Result<std::string> d = Sha256File(path);
  EXPECT_TRUE(d.ok()) << d.message();
  return d.ok() ? *d : "";
}
// The names in a directory: a failed apply must leave no temporary file beside its output.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct FakeTensor {
  std::string name;
  std::vector<float> values;
};
// A small GGUF of f32 vectors, each filled from its seed.
void WriteGguf(const std::string& path, const std::vector<FakeTensor>& tensors, const std::string& description = "x") {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  w.SetString("general.description", description);
  for (const FakeTensor& t : tensors) {
    ASSERT_TRUE(w.AddTensorData(t.name, DType::kF32, {static_cast<int64_t>(t.values.size())}, t.values.data()).ok());
  }
  ASSERT_TRUE(w.Write(path).ok());
}
std::vector<float> Values(size_t n, float seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + 0.25f * static_cast<float>(i % 97);
  return v;
}

// Diff then apply: NEW comes back byte for byte.
DeltaDiffReport RoundTrip(const std::string& old_path, const std::string& new_path, const std::string& dir,
                          const DeltaDiffOptions& options = {}) {
  const std::string patch = dir + "/p.gdelta", out = dir + "/rebuilt.gguf";
  Result<DeltaDiffReport> diff = DiffGguf(old_path, new_path, patch, options);
  EXPECT_TRUE(diff.ok()) << diff.message();
  if (!diff.ok()) return {};
  EXPECT_EQ(diff->patch_bytes, fs::file_size(patch));
  EXPECT_EQ(diff->new_file_bytes, fs::file_size(new_path));
  EXPECT_EQ(diff->new_sha256, Digest(new_path));
  EXPECT_EQ(diff->old_sha256, Digest(old_path));
  Result<DeltaApplyReport> apply = ApplyDelta(old_path, patch, out);
  EXPECT_TRUE(apply.ok()) << apply.message();
  if (!apply.ok()) return *diff;
  EXPECT_EQ(apply->sha256, diff->new_sha256);
  EXPECT_EQ(Digest(out), diff->new_sha256);
  EXPECT_EQ(ReadBytes(out), ReadBytes(new_path));
  EXPECT_EQ(apply->bytes_written, diff->new_file_bytes);
  EXPECT_EQ(apply->bytes_literal, diff->literal_bytes);
  EXPECT_EQ(apply->bytes_copied, diff->copied_bytes);
  EXPECT_EQ(diff->literal_bytes + diff->copied_bytes <= diff->new_file_bytes, true);
  return *diff;
}

// ---- real models, made with the project's own tools ----

class DeltaOnModels : public ::testing::Test {
 protected:
  // tiny-gemma3 in F16 (4 layers), and two quantizations of it that differ in one tensor only.
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    tools::SynthOptions s;
    s.preset = "tiny-gemma3";
    s.type = "F16";
    s.seed = 3;
    s.output_path = dir_->File("base-f16.gguf");
    ASSERT_TRUE(tools::Synth(s).ok());
    tools::QuantizeOptions q;
    q.input_path = s.output_path;
    q.type = "Q8_0";
    q.n_threads = 2;
    q.output_path = dir_->File("q8.gguf");
    ASSERT_TRUE(tools::Quantize(q).ok());
    q.token_embedding_type = "Q4_0";  // the same model with its embedding table re-quantized
    q.output_path = dir_->File("q8-embd-q4.gguf");
    ASSERT_TRUE(tools::Quantize(q).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static test::TempDir* dir_;
  test::TempDir work_;
};
test::TempDir* DeltaOnModels::dir_ = nullptr;

TEST_F(DeltaOnModels, ARequantizedTensorIsTheOnlyOneSent) {
  const std::string old_path = dir_->File("q8.gguf"), new_path = dir_->File("q8-embd-q4.gguf");
  const DeltaDiffReport r = RoundTrip(old_path, new_path, work_.path());
  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(new_path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(r.tensors_total, static_cast<int>((*f)->tensors().size()));
  EXPECT_EQ(r.tensors_changed, 1);  // token_embd.weight
  EXPECT_EQ(r.tensors_added, 0);
  EXPECT_EQ(r.tensors_removed, 0);
  EXPECT_FALSE(r.metadata_changed);
  const uint64_t embd = (*f)->FindTensor("token_embd.weight")->nbytes;
  // The header changed (the tensor's type and every later offset), and the embedding table is sent.
  EXPECT_GE(r.literal_bytes, embd);
  EXPECT_LE(r.literal_bytes, embd + (*f)->data_offset() + 64);
  EXPECT_LT(r.patch_bytes, r.new_file_bytes);
  // ... and back again.
  test::TempDir back;
  const DeltaDiffReport reverse = RoundTrip(new_path, old_path, back.path());
  EXPECT_EQ(reverse.tensors_changed, 1);
}

TEST_F(DeltaOnModels, RequantizedFfnTensorsOfTwoLayers) {
  tools::QuantizeOptions q;
  q.input_path = dir_->File("base-f16.gguf");
  q.type = "Q8_0";
  q.n_threads = 2;
  q.tensor_types = {"blk\\.[01]\\.ffn_(up|down|gate)=Q4_0"};
  q.output_path = work_.File("ffn-q4.gguf");
  Result<tools::QuantizeReport> quantized = tools::Quantize(q);
  ASSERT_TRUE(quantized.ok()) << quantized.message();
  int q4 = 0;
  uint64_t q4_bytes = 0;
  for (const tools::QuantizedTensor& t : quantized->tensors) {
    if (t.to == "Q4_0") ++q4, q4_bytes += t.bytes_out;
  }
  EXPECT_EQ(q4, 6);
  const DeltaDiffReport r = RoundTrip(dir_->File("q8.gguf"), q.output_path, work_.path());
  EXPECT_EQ(r.tensors_changed, 6);
  EXPECT_FALSE(r.metadata_changed);
  EXPECT_GE(r.literal_bytes, q4_bytes);
  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(q.output_path);
  ASSERT_TRUE(f.ok());
  EXPECT_LE(r.literal_bytes, q4_bytes + (*f)->data_offset());
}

TEST_F(DeltaOnModels, AMetadataOnlyChangeCopiesEveryTensor) {
  tools::QuantizeOptions q;
  q.input_path = dir_->File("base-f16.gguf");
  q.type = "Q8_0";
  q.n_threads = 2;
  q.overrides = {"general.description=str:the same weights, a longer description than before"};
  q.output_path = work_.File("described.gguf");
  ASSERT_TRUE(tools::Quantize(q).ok());
  const DeltaDiffReport r = RoundTrip(dir_->File("q8.gguf"), q.output_path, work_.path());
  EXPECT_TRUE(r.metadata_changed);
  EXPECT_EQ(r.tensors_changed, 0);
  EXPECT_EQ(r.tensors_moved, 0);
  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(q.output_path);
  ASSERT_TRUE(f.ok());
  // Only the header travels: the tensors moved in the file with it and are copied from their old place.
  EXPECT_LE(r.literal_bytes, (*f)->data_offset());
  EXPECT_LT(r.patch_bytes, (*f)->data_offset() + 16384);
}

TEST_F(DeltaOnModels, AddedAndRemovedLayers) {
  // The synthesizer's layer values depend on (seed, tensor name, row): 2 layers are 3 layers' first two.
  tools::SynthOptions s;
  s.preset = "tiny-gemma3";
  s.type = "Q4_0";
  s.seed = 9;
  s.n_layers = 2;
  s.output_path = work_.File("l2.gguf");
  ASSERT_TRUE(tools::Synth(s).ok());
  s.n_layers = 3;
  s.output_path = work_.File("l3.gguf");
  ASSERT_TRUE(tools::Synth(s).ok());
  Result<std::unique_ptr<GgufFile>> l2 = GgufFile::Open(work_.File("l2.gguf"));
  Result<std::unique_ptr<GgufFile>> l3 = GgufFile::Open(work_.File("l3.gguf"));
  ASSERT_TRUE(l2.ok() && l3.ok());
  const int added = static_cast<int>((*l3)->tensors().size() - (*l2)->tensors().size());
  ASSERT_GT(added, 5);
  uint64_t layer2_bytes = 0, outside_layers = 0;
  for (const GgufTensor& t : (*l3)->tensors()) {
    if (t.name.starts_with("blk.2.")) layer2_bytes += t.nbytes;
    if (!t.name.starts_with("blk.")) outside_layers += t.nbytes;
  }
  // What synth writes outside the layers (the embedding table, the final norm) differs with the
  // depth; every tensor of layers 0 and 1 must be copied.
  {
    test::TempDir d;
    const DeltaDiffReport grow = RoundTrip(work_.File("l2.gguf"), work_.File("l3.gguf"), d.path());
    EXPECT_EQ(grow.tensors_added, added);
    EXPECT_LE(grow.tensors_changed, 2);
    EXPECT_EQ(grow.tensors_removed, 0);
    EXPECT_TRUE(grow.metadata_changed);  // block_count
    EXPECT_GE(grow.literal_bytes, layer2_bytes);
    EXPECT_LE(grow.literal_bytes, layer2_bytes + outside_layers + (*l3)->data_offset() + 64 * added);
  }
  {
    test::TempDir d;
    const DeltaDiffReport shrink = RoundTrip(work_.File("l3.gguf"), work_.File("l2.gguf"), d.path());
    EXPECT_EQ(shrink.tensors_removed, added);
    EXPECT_EQ(shrink.tensors_added, 0);
    EXPECT_LE(shrink.tensors_changed, 2);
    EXPECT_LE(shrink.literal_bytes, (*l2)->data_offset() + outside_layers);  // no layer's tensor
  }
}

TEST_F(DeltaOnModels, ADifferentSeedChangesEveryTensor) {
  tools::SynthOptions s;
  s.preset = "tiny-gemma3";
  s.type = "Q4_0";
  s.seed = 1;
  s.output_path = work_.File("a.gguf");
  ASSERT_TRUE(tools::Synth(s).ok());
  s.seed = 2;
  s.output_path = work_.File("b.gguf");
  ASSERT_TRUE(tools::Synth(s).ok());
  const DeltaDiffReport r = RoundTrip(work_.File("a.gguf"), work_.File("b.gguf"), work_.path());
  // Norm weights do not depend on the seed; everything random does, and is sent whole.
  EXPECT_GT(r.tensors_changed, r.tensors_total / 2);
  EXPECT_GT(r.patch_bytes, r.new_file_bytes / 2);
}

// ---- hand-made files: what the real ones do not show ----

TEST(Delta, ARenamedOrDuplicatedTensorIsCopied) {
  test::TempDir d;
  const std::vector<float> a = Values(1000, 1), b = Values(3000, 2), c = Values(500, 3);
  WriteGguf(d.File("old.gguf"), {{"a", a}, {"b", b}, {"c", c}});
  // b renamed, a moved behind it and duplicated, c dropped, one new tensor.
  WriteGguf(d.File("new.gguf"), {{"b2", b}, {"a", a}, {"a_copy", a}, {"n", Values(64, 9)}});
  test::TempDir w;
  const DeltaDiffReport r = RoundTrip(d.File("old.gguf"), d.File("new.gguf"), w.path());
  EXPECT_EQ(r.tensors_total, 4);
  EXPECT_EQ(r.tensors_added, 3);
  EXPECT_EQ(r.tensors_moved, 2);  // b2 from b, a_copy from a
  EXPECT_EQ(r.tensors_removed, 2);
  EXPECT_EQ(r.tensors_changed, 0);
  EXPECT_EQ(r.copied_bytes, (1000 + 3000 + 1000) * 4u);
}

TEST(Delta, PaddingThatIsNotZeroIsKeptByteForByte) {
  test::TempDir d;
  WriteGguf(d.File("old.gguf"), {{"a", Values(3, 1)}, {"b", Values(40, 2)}});
  WriteGguf(d.File("new.gguf"), {{"a", Values(3, 1)}, {"b", Values(40, 3)}});
  // Another writer may leave anything between tensors: poke bytes into a's 20 bytes of padding and
  // after the last tensor.
  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(d.File("new.gguf"));
  ASSERT_TRUE(f.ok());
  const size_t a_end = (*f)->data_offset() + 12;
  f->reset();
  std::string bytes = ReadBytes(d.File("new.gguf"));
  bytes[a_end + 3] = '\xab';
  bytes += "trailing";
  WriteBytes(d.File("new.gguf"), bytes);
  test::TempDir w;
  const DeltaDiffReport r = RoundTrip(d.File("old.gguf"), d.File("new.gguf"), w.path());
  EXPECT_EQ(r.tensors_changed, 1);
}

TEST(Delta, ReadsThePatchHeaderWithoutApplyingIt) {
  test::TempDir d;
  WriteGguf(d.File("old.gguf"), {{"a", Values(5000, 1)}, {"b", Values(3000, 2)}});
  WriteGguf(d.File("new.gguf"), {{"a", Values(5000, 1)}, {"b", Values(3000, 5)}});
  DeltaDiffOptions o;
  o.chunk_size = 4096;
  Result<DeltaDiffReport> r = DiffGguf(d.File("old.gguf"), d.File("new.gguf"), d.File("p"), o);
  ASSERT_TRUE(r.ok()) << r.message();
  Result<DeltaPatchInfo> info = ReadDeltaPatchInfo(d.File("p"));
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_EQ(info->version, kDeltaVersion);
  EXPECT_EQ(info->chunk_size, 4096u);
  EXPECT_EQ(info->old_sha256, Digest(d.File("old.gguf")));
  EXPECT_EQ(info->old_size, fs::file_size(d.File("old.gguf")));
  EXPECT_EQ(info->new_sha256, Digest(d.File("new.gguf")));
  EXPECT_EQ(info->new_size, fs::file_size(d.File("new.gguf")));
  EXPECT_EQ(info->patch_bytes, r->patch_bytes);
  EXPECT_EQ(info->literal_bytes, r->literal_bytes);
  EXPECT_EQ(info->copied_bytes, r->copied_bytes);
  EXPECT_EQ(info->n_literal, 1u);  // b (the header is unchanged: same names, types and offsets)
  EXPECT_GE(info->n_copy, 2u);     // the header and a
  EXPECT_FALSE(ReadDeltaPatchInfo(d.File("old.gguf")).ok());
  EXPECT_NE(ReadDeltaPatchInfo(d.File("old.gguf")).message().find("not a gemlet patch"), std::string::npos);
}

// ---- refusals: nothing appears at new_out, no temporary file is left ----

class DeltaRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteGguf(d_.File("old.gguf"), {{"a", Values(5000, 1)}, {"b", Values(3000, 2)}, {"c", Values(100, 3)}});
    WriteGguf(d_.File("new.gguf"), {{"a", Values(5000, 1)}, {"b", Values(3000, 5)}, {"c", Values(100, 3)}});
    DeltaDiffOptions o;
    o.chunk_size = 4096;  // b's 12000 bytes: 3 chunks
    Result<DeltaDiffReport> r = DiffGguf(d_.File("old.gguf"), d_.File("new.gguf"), d_.File("p"), o);
    ASSERT_TRUE(r.ok()) << r.message();
    before_ = Names(d_.path());
  }
  // Apply must fail with `expect` in its message and leave the directory as it was.
  void ExpectRefused(const std::string& old_path, const std::string& patch, const std::string& expect,
                     const DeltaApplyOptions& options = {}) {
    Result<DeltaApplyReport> r = ApplyDelta(old_path, patch, d_.File("out.gguf"), options);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find(expect), std::string::npos) << r.message();
    EXPECT_FALSE(fs::exists(d_.File("out.gguf")));
    EXPECT_EQ(Names(d_.path()), before_);
  }
  test::TempDir d_;
  std::vector<std::string> before_;
};

TEST_F(DeltaRefusals, AWrongOldFileBeforeAnythingIsWritten) {
  // Same size, other bytes: the whole-file digest names both.
  WriteGguf(d_.File("other.gguf"), {{"a", Values(5000, 7)}, {"b", Values(3000, 2)}, {"c", Values(100, 3)}});
  before_ = Names(d_.path());
  ExpectRefused(d_.File("other.gguf"), d_.File("p"),
                "is not the file the patch was made from: its SHA-256 is " + Digest(d_.File("other.gguf")) +
                    ", the patch was made from " + Digest(d_.File("old.gguf")));
  // Without the whole-file check the first copied tensor's digest catches it.
  DeltaApplyOptions trusting;
  trusting.verify_old = false;
  ExpectRefused(d_.File("other.gguf"), d_.File("p"), "tensor 'a'", trusting);
  // Another size is refused before OLD is even read.
  ExpectRefused(d_.File("p"), d_.File("p"), "the patch was made from a file of");
}

TEST_F(DeltaRefusals, ACorruptByteNamesItsChunk) {
  Result<DeltaPatchInfo> info = ReadDeltaPatchInfo(d_.File("p"));
  ASSERT_TRUE(info.ok());
  std::string bytes = ReadBytes(d_.File("p"));
  // The literal section is b's 3 chunks at the end: 4096, 4096 and 3808 bytes, each after its digest.
  const size_t second_chunk = bytes.size() - (32 + 3808) - 4096 + 100;
  bytes[second_chunk] ^= 0x10;
  WriteBytes(d_.File("bad"), bytes);
  before_ = Names(d_.path());
  ExpectRefused(d_.File("old.gguf"), d_.File("bad"), "is corrupt: chunk 2 of 3 of tensor 'b'");
  // A damaged digest is the same to apply: the chunk and its digest disagree.
  bytes = ReadBytes(d_.File("p"));
  bytes[bytes.size() - 3808 - 1] ^= 1;
  WriteBytes(d_.File("bad"), bytes);
  ExpectRefused(d_.File("old.gguf"), d_.File("bad"), "chunk 3 of 3 of tensor 'b'");
  // A damaged header or op table is caught before anything else.
  for (size_t at : {size_t{20}, size_t{kDeltaHeaderBytes + 9}}) {
    bytes = ReadBytes(d_.File("p"));
    bytes[at] ^= 1;
    WriteBytes(d_.File("bad"), bytes);
    ExpectRefused(d_.File("old.gguf"), d_.File("bad"), "its header and op table have SHA-256");
  }
}

TEST_F(DeltaRefusals, ATruncatedOrLongerPatch) {
  const std::string bytes = ReadBytes(d_.File("p"));
  for (size_t keep : {size_t{0}, size_t{100}, kDeltaHeaderBytes, kDeltaHeaderBytes + 30, bytes.size() - 4000,
                      bytes.size() - 1}) {
    WriteBytes(d_.File("short"), bytes.substr(0, keep));
    before_ = Names(d_.path());
    ExpectRefused(d_.File("old.gguf"), d_.File("short"), "truncated");
  }
  WriteBytes(d_.File("long"), bytes + "x");
  before_ = Names(d_.path());
  ExpectRefused(d_.File("old.gguf"), d_.File("long"), "1 bytes after its last chunk");
}

TEST_F(DeltaRefusals, CancelledByProgress) {
  DeltaApplyOptions o;
  int calls = 0;
  o.progress = [&calls](uint64_t done, uint64_t total) {
    EXPECT_LE(done, total);
    return ++calls < 2;
  };
  Result<DeltaApplyReport> r = ApplyDelta(d_.File("old.gguf"), d_.File("p"), d_.File("out.gguf"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(Names(d_.path()), before_);
}

TEST_F(DeltaRefusals, AnExistingOutputIsReplacedOnlyBySuccess) {
  WriteBytes(d_.File("out.gguf"), "the previous version");
  // A failure leaves it as it was ...
  std::string bytes = ReadBytes(d_.File("p"));
  bytes[bytes.size() - 10] ^= 1;
  WriteBytes(d_.File("bad"), bytes);
  const std::vector<std::string> names = Names(d_.path());
  EXPECT_FALSE(ApplyDelta(d_.File("old.gguf"), d_.File("bad"), d_.File("out.gguf")).ok());
  EXPECT_EQ(ReadBytes(d_.File("out.gguf")), "the previous version");
  EXPECT_EQ(Names(d_.path()), names);
  // ... and a success replaces it whole.
  Result<DeltaApplyReport> r = ApplyDelta(d_.File("old.gguf"), d_.File("p"), d_.File("out.gguf"));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(ReadBytes(d_.File("out.gguf")), ReadBytes(d_.File("new.gguf")));
  EXPECT_EQ(Names(d_.path()), names);
  // Patching a file onto itself works too: OLD is read through its own descriptor until the rename.
  WriteBytes(d_.File("inplace.gguf"), ReadBytes(d_.File("old.gguf")));
  r = ApplyDelta(d_.File("inplace.gguf"), d_.File("p"), d_.File("inplace.gguf"));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(ReadBytes(d_.File("inplace.gguf")), ReadBytes(d_.File("new.gguf")));
}

TEST_F(DeltaRefusals, MissingFilesAreNamed) {
  ExpectRefused(d_.File("nope.gguf"), d_.File("p"), "nope.gguf");
  ExpectRefused(d_.File("old.gguf"), d_.File("nope.patch"), "nope.patch");
  Result<DeltaDiffReport> r = DiffGguf(d_.File("old.gguf"), d_.File("p"), d_.File("q"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("p"), std::string::npos) << r.message();
  EXPECT_FALSE(fs::exists(d_.File("q")));
}

}  // namespace
}  // namespace gemlet::store
