// GgufWriter -> GgufFile round trips: every metadata type, tensors of several types, alignment, failures.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "gguf/gguf_reader.h"
#include "gguf_test_util.h"

namespace gemlet {
namespace {

using testing::FileExists;
using testing::ReadBytes;
using testing::TempPath;

std::unique_ptr<GgufFile> WriteAndOpen(GgufWriter& w, const std::string& path) {
  Status s = w.Write(path);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(FileExists(path + ".tmp"));
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.message();
  return file.ok() ? std::move(file).value() : nullptr;
}

GgufValue Scalar(GgufType type, uint64_t u, int64_t i, double f) {
  GgufValue v;
  v.type = type;
  v.u64 = u;
  v.i64 = i;
  v.f64 = f;
  return v;
}

GgufValue NumericArray(GgufType elem, const void* raw, uint64_t count) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = elem;
  v.raw = static_cast<const uint8_t*>(raw);
  v.count = count;
  return v;
}

GgufValue StringArray(const std::vector<std::string_view>& strings) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kString;
  v.strings = strings;
  v.count = strings.size();
  return v;
}

GgufValue ArrayOfArrays(std::vector<GgufValue> arrays) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kArray;
  v.count = arrays.size();
  v.arrays = std::move(arrays);
  return v;
}

template <typename T>
std::vector<T> ArrayValues(const GgufValue& v) {
  std::vector<T> out(static_cast<size_t>(v.count));
  if (v.count) std::memcpy(out.data(), v.raw, out.size() * sizeof(T));
  return out;
}

const std::string kChinese = "你好，世界：模型";  // UTF-8, 3 bytes per character

TEST(GgufWriter, RoundTripsEveryScalarType) {
  GgufWriter w;
  ASSERT_TRUE(w.SetValue("u8", Scalar(GgufType::kUint8, 0xAB, 0, 0)).ok());
  ASSERT_TRUE(w.SetValue("i8", Scalar(GgufType::kInt8, 0, -128, 0)).ok());
  ASSERT_TRUE(w.SetValue("u16", Scalar(GgufType::kUint16, 65535, 0, 0)).ok());
  ASSERT_TRUE(w.SetValue("i16", Scalar(GgufType::kInt16, 0, -32768, 0)).ok());
  w.SetU32("u32", 0xFFFFFFFFu);
  w.SetI32("i32", std::numeric_limits<int32_t>::min());
  w.SetU64("u64", std::numeric_limits<uint64_t>::max());
  w.SetI64("i64", std::numeric_limits<int64_t>::min());
  w.SetF32("f32", -1.5e-7f);
  w.SetF64("f64", 3.141592653589793);
  w.SetBool("bool_true", true);
  w.SetBool("bool_false", false);
  w.SetString("str", "plain ascii");
  w.SetString("str_zh", kChinese);
  w.SetString("str_empty", "");
  w.SetString("str_nul", std::string("a\0b", 3));
  ASSERT_TRUE(w.SetValue("f32_nan", Scalar(GgufType::kFloat32, 0, 0, std::nan(""))).ok());
  ASSERT_TRUE(w.SetValue("f64_neg_inf", Scalar(GgufType::kFloat64, 0, 0, -INFINITY)).ok());

  auto f = WriteAndOpen(w, TempPath("scalars.gguf"));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->Find("u8")->type, GgufType::kUint8);
  EXPECT_EQ(f->Find("u8")->u64, 0xABu);
  EXPECT_EQ(f->Find("i8")->type, GgufType::kInt8);
  EXPECT_EQ(f->Find("i8")->i64, -128);
  EXPECT_EQ(f->Find("u16")->type, GgufType::kUint16);
  EXPECT_EQ(f->Find("u16")->u64, 65535u);
  EXPECT_EQ(f->Find("i16")->type, GgufType::kInt16);
  EXPECT_EQ(f->Find("i16")->i64, -32768);
  EXPECT_EQ(f->Find("u32")->type, GgufType::kUint32);
  EXPECT_EQ(*f->GetU32("u32"), 0xFFFFFFFFu);
  EXPECT_EQ(f->Find("i32")->type, GgufType::kInt32);
  EXPECT_EQ(f->Find("i32")->i64, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->Find("u64")->type, GgufType::kUint64);
  EXPECT_EQ(f->Find("u64")->u64, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->Find("i64")->type, GgufType::kInt64);
  EXPECT_EQ(f->Find("i64")->i64, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->Find("f32")->type, GgufType::kFloat32);
  EXPECT_EQ(*f->GetF32("f32"), -1.5e-7f);
  EXPECT_EQ(f->Find("f64")->type, GgufType::kFloat64);
  EXPECT_EQ(f->Find("f64")->f64, 3.141592653589793);
  EXPECT_TRUE(*f->GetBool("bool_true"));
  EXPECT_FALSE(*f->GetBool("bool_false"));
  EXPECT_EQ(*f->GetString("str"), "plain ascii");
  EXPECT_EQ(*f->GetString("str_zh"), kChinese);
  EXPECT_EQ(f->Find("str_zh")->str.size(), kChinese.size());
  EXPECT_EQ(*f->GetString("str_empty"), "");
  EXPECT_EQ(*f->GetString("str_nul"), std::string("a\0b", 3));
  EXPECT_TRUE(std::isnan(f->Find("f32_nan")->f64));
  EXPECT_EQ(f->Find("f64_neg_inf")->f64, -INFINITY);

  // Keys come back in insertion order.
  EXPECT_EQ(f->metadata().front().first, "u8");
  EXPECT_EQ(f->metadata().back().first, "f64_neg_inf");
}

TEST(GgufWriter, RoundTripsArraysOfEveryType) {
  const uint8_t u8[] = {0, 1, 255};
  const int8_t i8[] = {-128, 0, 127};
  const uint16_t u16[] = {0, 65535};
  const int16_t i16[] = {-32768, 32767, -1};
  const uint64_t u64[] = {0, std::numeric_limits<uint64_t>::max()};
  const int64_t i64[] = {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max()};
  const double f64[] = {-0.0, 1e300, -2.5};

  GgufWriter w;
  ASSERT_TRUE(w.SetValue("a.u8", NumericArray(GgufType::kUint8, u8, 3)).ok());
  ASSERT_TRUE(w.SetValue("a.i8", NumericArray(GgufType::kInt8, i8, 3)).ok());
  ASSERT_TRUE(w.SetValue("a.u16", NumericArray(GgufType::kUint16, u16, 2)).ok());
  ASSERT_TRUE(w.SetValue("a.i16", NumericArray(GgufType::kInt16, i16, 3)).ok());
  w.SetU32Array("a.u32", {0, 7, 0xFFFFFFFFu});
  w.SetI32Array("a.i32", {-1, 2, std::numeric_limits<int32_t>::min()});
  ASSERT_TRUE(w.SetValue("a.u64", NumericArray(GgufType::kUint64, u64, 2)).ok());
  ASSERT_TRUE(w.SetValue("a.i64", NumericArray(GgufType::kInt64, i64, 3)).ok());
  w.SetF32Array("a.f32", {1.0f, -1000.0f, 0.25f, -INFINITY});
  ASSERT_TRUE(w.SetValue("a.f64", NumericArray(GgufType::kFloat64, f64, 3)).ok());
  w.SetBoolArray("a.bool", {true, false, true, true});
  w.SetStringArray("a.str", {"<pad>", "", kChinese, "▁the", std::string(1000, 'x')});
  // Empty arrays of each kind.
  w.SetI32Array("empty.i32", {});
  w.SetStringArray("empty.str", {});
  w.SetBoolArray("empty.bool", {});
  ASSERT_TRUE(w.SetValue("empty.arr", ArrayOfArrays({})).ok());

  auto f = WriteAndOpen(w, TempPath("arrays.gguf"));
  ASSERT_NE(f, nullptr);
  auto check_type = [&](const char* key, GgufType elem, uint64_t count) {
    const GgufValue* v = f->Find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type, GgufType::kArray) << key;
    EXPECT_EQ(v->elem_type, elem) << key;
    EXPECT_EQ(v->count, count) << key;
  };
  check_type("a.u8", GgufType::kUint8, 3);
  EXPECT_EQ(ArrayValues<uint8_t>(*f->Find("a.u8")), std::vector<uint8_t>(u8, u8 + 3));
  check_type("a.i8", GgufType::kInt8, 3);
  EXPECT_EQ(ArrayValues<int8_t>(*f->Find("a.i8")), std::vector<int8_t>(i8, i8 + 3));
  check_type("a.u16", GgufType::kUint16, 2);
  EXPECT_EQ(ArrayValues<uint16_t>(*f->Find("a.u16")), std::vector<uint16_t>(u16, u16 + 2));
  check_type("a.i16", GgufType::kInt16, 3);
  EXPECT_EQ(f->Find("a.i16")->IntAt(0), -32768);
  check_type("a.u32", GgufType::kUint32, 3);
  EXPECT_EQ(ArrayValues<uint32_t>(*f->Find("a.u32")), (std::vector<uint32_t>{0, 7, 0xFFFFFFFFu}));
  check_type("a.i32", GgufType::kInt32, 3);
  EXPECT_EQ(*f->GetI32Array("a.i32"), (std::vector<int32_t>{-1, 2, std::numeric_limits<int32_t>::min()}));
  check_type("a.u64", GgufType::kUint64, 2);
  EXPECT_EQ(ArrayValues<uint64_t>(*f->Find("a.u64")), std::vector<uint64_t>(u64, u64 + 2));
  check_type("a.i64", GgufType::kInt64, 3);
  EXPECT_EQ(ArrayValues<int64_t>(*f->Find("a.i64")), std::vector<int64_t>(i64, i64 + 3));
  check_type("a.f32", GgufType::kFloat32, 4);
  EXPECT_EQ(*f->GetF32Array("a.f32"), (std::vector<float>{1.0f, -1000.0f, 0.25f, -INFINITY}));
  check_type("a.f64", GgufType::kFloat64, 3);
  EXPECT_EQ(ArrayValues<double>(*f->Find("a.f64")), std::vector<double>(f64, f64 + 3));
  EXPECT_TRUE(std::signbit(f->Find("a.f64")->FloatAt(0)));
  check_type("a.bool", GgufType::kBool, 4);
  EXPECT_EQ(*f->GetBoolArray("a.bool"), (std::vector<bool>{true, false, true, true}));
  check_type("a.str", GgufType::kString, 5);
  const auto* strs = f->GetStringArray("a.str");
  ASSERT_NE(strs, nullptr);
  EXPECT_EQ((*strs)[0], "<pad>");
  EXPECT_EQ((*strs)[1], "");
  EXPECT_EQ((*strs)[2], kChinese);
  EXPECT_EQ((*strs)[3], "▁the");
  EXPECT_EQ((*strs)[4], std::string(1000, 'x'));
  check_type("empty.i32", GgufType::kInt32, 0);
  check_type("empty.str", GgufType::kString, 0);
  check_type("empty.bool", GgufType::kBool, 0);
  check_type("empty.arr", GgufType::kArray, 0);
  EXPECT_EQ(f->Find("empty.str")->ToString(), "[]");
}

TEST(GgufWriter, RoundTripsNestedArrays) {
  const int32_t row0[] = {1, 2, 3};
  const int32_t row1[] = {-4};
  GgufValue matrix = ArrayOfArrays({NumericArray(GgufType::kInt32, row0, 3), NumericArray(GgufType::kInt32, row1, 1),
                                    NumericArray(GgufType::kInt32, nullptr, 0)});
  GgufValue words = ArrayOfArrays({StringArray({"a", kChinese}), StringArray({})});
  GgufValue deep = NumericArray(GgufType::kInt32, row0, 2);  // 8 levels: the deepest the reader accepts
  for (int level = 2; level <= kGgufMaxArrayDepth; ++level) deep = ArrayOfArrays({deep});

  GgufWriter w;
  ASSERT_TRUE(w.SetValue("matrix", matrix).ok());
  ASSERT_TRUE(w.SetValue("words", words).ok());
  Status s = w.SetValue("deep", deep);
  ASSERT_TRUE(s.ok()) << s.message();
  auto f = WriteAndOpen(w, TempPath("nested.gguf"));
  ASSERT_NE(f, nullptr);

  const GgufValue* m = f->Find("matrix");
  ASSERT_EQ(m->elem_type, GgufType::kArray);
  ASSERT_EQ(m->arrays.size(), 3u);
  EXPECT_EQ(ArrayValues<int32_t>(m->arrays[0]), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ArrayValues<int32_t>(m->arrays[1]), (std::vector<int32_t>{-4}));
  EXPECT_EQ(m->arrays[2].count, 0u);
  EXPECT_EQ(m->ToString(), "[[1, 2, 3], [-4], []]");
  const GgufValue* wv = f->Find("words");
  ASSERT_EQ(wv->arrays.size(), 2u);
  ASSERT_EQ(wv->arrays[0].strings.size(), 2u);
  EXPECT_EQ(wv->arrays[0].strings[1], kChinese);
  EXPECT_EQ(wv->arrays[1].count, 0u);
  const GgufValue* d = f->Find("deep");
  for (int level = 2; level <= kGgufMaxArrayDepth; ++level) {
    ASSERT_EQ(d->elem_type, GgufType::kArray);
    ASSERT_EQ(d->arrays.size(), 1u);
    d = &d->arrays[0];
  }
  EXPECT_EQ(ArrayValues<int32_t>(*d), (std::vector<int32_t>{1, 2}));

  // A value read from one file copies into another unchanged (how metadata is carried over).
  GgufWriter copy;
  for (const auto& [key, value] : f->metadata()) ASSERT_TRUE(copy.SetValue(std::string(key), value).ok());
  const std::string copy_path = TempPath("nested_copy.gguf");
  ASSERT_TRUE(copy.Write(copy_path).ok());
  EXPECT_EQ(ReadBytes(copy_path), ReadBytes(TempPath("nested.gguf")));
}

TEST(GgufWriter, SetValueRejectsInconsistentValues) {
  GgufWriter w;
  EXPECT_NE(w.SetValue("k", Scalar(GgufType::kBool, 2, 2, 0)).message().find("not 0 or 1"), std::string::npos);
  EXPECT_NE(w.SetValue("k", Scalar(GgufType::kUint8, 300, 300, 0)).message().find("does not fit in u8"),
            std::string::npos);
  EXPECT_NE(w.SetValue("k", Scalar(GgufType::kInt16, 0, 40000, 0)).message().find("does not fit in i16"),
            std::string::npos);
  GgufValue bad_count = StringArray({"a"});
  bad_count.count = 2;
  EXPECT_NE(w.SetValue("k", bad_count).message().find("claims 2 elements but holds 1"), std::string::npos);
  EXPECT_NE(w.SetValue("k", NumericArray(GgufType::kInt32, nullptr, 3)).message().find("has no data"),
            std::string::npos);
  const uint8_t bools[] = {1, 2};
  EXPECT_NE(w.SetValue("k", NumericArray(GgufType::kBool, bools, 2)).message().find("bool element 1"),
            std::string::npos);
  GgufValue too_deep = NumericArray(GgufType::kInt32, nullptr, 0);
  for (int level = 1; level <= kGgufMaxArrayDepth; ++level) too_deep = ArrayOfArrays({too_deep});
  EXPECT_NE(w.SetValue("k", too_deep).message().find("nested deeper than 8"), std::string::npos);
  GgufValue not_array = ArrayOfArrays({Scalar(GgufType::kUint32, 1, 1, 0)});
  EXPECT_NE(w.SetValue("k", not_array).message().find("is a u32"), std::string::npos);
  EXPECT_NE(w.SetValue("k", Scalar(static_cast<GgufType>(13), 0, 0, 0)).message().find("unknown value type 13"),
            std::string::npos);
  EXPECT_FALSE(w.HasKey("k"));  // a rejected value leaves nothing behind
  EXPECT_NE(w.SetValue("key.name", Scalar(GgufType::kBool, 5, 5, 0)).message().find("key.name"), std::string::npos);
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.SetU32("a", 1);
  w.SetString("b", "x");
  w.SetU32("c", 3);
  w.SetString("a", "now a string");
  EXPECT_TRUE(w.HasKey("a"));
  EXPECT_FALSE(w.HasKey("z"));
  auto f = WriteAndOpen(w, TempPath("replace.gguf"));
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(*f->GetString("a"), "now a string");
  EXPECT_EQ(f->metadata()[1].first, "b");
  EXPECT_EQ(f->metadata()[2].first, "c");
}

// Checks every tensor's bytes and that all padding (directory -> data, between tensors) is zero.
void ExpectZeroPadding(const GgufFile& f, const std::vector<uint8_t>& bytes) {
  std::vector<bool> covered(bytes.size(), false);
  for (const GgufTensor& t : f.tensors()) {
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    for (size_t i = 0; i < t.nbytes; ++i) covered[f.data_offset() + t.offset + i] = true;
  }
  for (size_t i = f.data_offset(); i < bytes.size(); ++i) {
    if (!covered[i]) {
      EXPECT_EQ(bytes[i], 0) << "padding byte " << i;
    }
  }
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
}

TEST(GgufWriter, WritesTensorsOfSeveralTypesAligned) {
  std::vector<float> f32(5 * 3);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.5f * static_cast<float>(i) - 3.0f;
  std::vector<uint16_t> f16(7);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint16_t>(0x3C00 + i);  // 1.0, 1.000977, ...
  // Two Q8_0 rows of 64 values: 2 blocks each of {f16 scale, 32 int8}, given as raw bytes.
  std::vector<uint8_t> q8(2 * 2 * 34);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<int8_t> i8(2 * 3 * 4 * 5);
  for (size_t i = 0; i < i8.size(); ++i) i8[i] = static_cast<int8_t>(i - 60);

  GgufWriter w;
  w.SetString("general.architecture", "test");
  ASSERT_TRUE(w.AddTensorData("f32", DType::kF32, {5, 3}, f32.data()).ok());
  ASSERT_TRUE(w.AddTensorData("f16.odd", DType::kF16, {7}, f16.data()).ok());
  ASSERT_TRUE(w.AddTensorData("q8_0", DType::kQ8_0, {64, 2}, q8.data()).ok());
  ASSERT_TRUE(w.AddTensorData("i8.4d", DType::kI8, {2, 3, 4, 5}, i8.data()).ok());
  const std::string path = TempPath("tensors.gguf");
  auto f = WriteAndOpen(w, path);
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->Has("general.alignment"));  // the default is not written
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->tensors().size(), 4u);

  const GgufTensor* t = f->FindTensor("f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::kF32);
  EXPECT_EQ(t->n_dims, 2);
  EXPECT_EQ(t->ShapeString(), "[5, 3]");
  EXPECT_EQ(t->nbytes, f32.size() * 4);
  EXPECT_EQ(std::memcmp(t->data, f32.data(), t->nbytes), 0);

  t = f->FindTensor("f16.odd");
  EXPECT_EQ(t->type, DType::kF16);
  EXPECT_EQ(t->nbytes, 14u);
  EXPECT_EQ(std::memcmp(t->data, f16.data(), 14), 0);

  t = f->FindTensor("q8_0");
  EXPECT_EQ(t->type, DType::kQ8_0);
  EXPECT_EQ(t->n_rows(), 2);
  EXPECT_EQ(t->nbytes, q8.size());
  EXPECT_EQ(std::memcmp(t->data, q8.data(), q8.size()), 0);

  t = f->FindTensor("i8.4d");
  EXPECT_EQ(t->n_dims, 4);
  EXPECT_EQ(t->ShapeString(), "[2, 3, 4, 5]");
  EXPECT_EQ(t->n_elements(), 120);
  EXPECT_EQ(std::memcmp(t->data, i8.data(), i8.size()), 0);

  // Offsets follow declaration order, each rounded up to the alignment.
  EXPECT_EQ(f->tensors()[0].offset, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
  EXPECT_EQ(f->tensors()[2].offset, 96u);
  EXPECT_EQ(f->tensors()[3].offset, 96u + 160u);
  const std::vector<uint8_t> bytes = ReadBytes(path);
  EXPECT_EQ(bytes.size(), f->data_offset() + 96 + 160 + 120);
  ExpectZeroPadding(*f, bytes);
}

TEST(GgufWriter, HonoursANonDefaultAlignment) {
  std::vector<float> a(3, 1.0f), b(5, 2.0f);
  GgufWriter w;
  w.SetU32("general.alignment", 256);
  ASSERT_TRUE(w.AddTensorData("a", DType::kF32, {3}, a.data()).ok());
  ASSERT_TRUE(w.AddTensorData("b", DType::kF32, {5}, b.data()).ok());
  const std::string path = TempPath("align256.gguf");
  auto f = WriteAndOpen(w, path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(*f->GetU32("general.alignment"), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->FindTensor("b")->offset, 256u);
  EXPECT_EQ(reinterpret_cast<const float*>(f->FindTensor("b")->data)[4], 2.0f);
  ExpectZeroPadding(*f, ReadBytes(path));

  // Setting the default explicitly writes nothing: the file is byte-identical to one without it.
  GgufWriter d1, d2;
  d1.SetU32("general.alignment", 32);
  d1.SetU32("x", 1);
  d2.SetU32("x", 1);
  ASSERT_TRUE(d1.Write(TempPath("d1.gguf")).ok());
  ASSERT_TRUE(d2.Write(TempPath("d2.gguf")).ok());
  EXPECT_EQ(ReadBytes(TempPath("d1.gguf")), ReadBytes(TempPath("d2.gguf")));
}

TEST(GgufWriter, RejectsABadAlignmentAndLeavesNoFile) {
  for (uint32_t bad : {0u, 3u, 48u}) {
    GgufWriter w;
    w.SetU32("general.alignment", bad);
    const std::string path = TempPath("bad_align.gguf");
    Status s = w.Write(path);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("not a power of two"), std::string::npos) << s.message();
    EXPECT_FALSE(FileExists(path));
    EXPECT_FALSE(FileExists(path + ".tmp"));
  }
  GgufWriter w;
  w.SetString("general.alignment", "32");
  EXPECT_NE(w.Write(TempPath("x.gguf")).message().find("general.alignment must be a u32"), std::string::npos);
}

TEST(GgufWriter, AFileWithoutTensorsOrMetadataLoads) {
  GgufWriter w;
  const std::string path = TempPath("empty.gguf");
  auto f = WriteAndOpen(w, path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->metadata().size(), 0u);
  EXPECT_EQ(f->tensors().size(), 0u);
  EXPECT_EQ(ReadBytes(path).size(), 24u);  // magic, version, two counts
}

TEST(GgufWriter, StreamsProducersInSmallChunks) {
  static constexpr int64_t n = 100003;  // not a multiple of anything convenient
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("stream", DType::kF32, {n}, [](ByteSink& sink) -> Status {
                 for (int64_t i = 0; i < n; ++i) {
                   const float x = static_cast<float>(i);
                   RETURN_IF_ERROR(sink.Write(&x, sizeof x));
                 }
                 return Status::Ok();
               }).ok());
  ASSERT_TRUE(w.AddTensor("after", DType::kF16, {2}, [](ByteSink& sink) {
                 const uint16_t h[2] = {0x3C00, 0xC000};
                 RETURN_IF_ERROR(sink.Write(h, 1));  // byte granularity is fine
                 RETURN_IF_ERROR(sink.Write(nullptr, 0));
                 return sink.Write(reinterpret_cast<const uint8_t*>(h) + 1, 3);
               }).ok());
  auto f = WriteAndOpen(w, TempPath("stream.gguf"));
  ASSERT_NE(f, nullptr);
  const float* x = reinterpret_cast<const float*>(f->FindTensor("stream")->data);
  for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(x[i], static_cast<float>(i));
  EXPECT_EQ(x[n - 1], static_cast<float>(n - 1));
  const uint8_t* h = f->FindTensor("after")->data;
  EXPECT_EQ(h[0], 0x00);
  EXPECT_EQ(h[1], 0x3C);
  EXPECT_EQ(h[3], 0xC0);
}

// A failed Write leaves neither the temp file nor a file under the final name; an older file survives.
void ExpectWriteFails(GgufWriter& w, const std::string& what) {
  const std::string path = TempPath("fail.gguf");
  {
    std::FILE* old = std::fopen(path.c_str(), "wb");
    ASSERT_NE(old, nullptr);
    std::fputs("previous contents", old);
    std::fclose(old);
  }
  Status s = w.Write(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_FALSE(FileExists(path + ".tmp"));
  const std::vector<uint8_t> kept = ReadBytes(path);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "previous contents");
}

TEST(GgufWriter, FailsWhenAProducerWritesTooFew) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("short", DType::kF32, {4}, [](ByteSink& sink) {
                 const float x[3] = {};
                 return sink.Write(x, sizeof x);
               }).ok());
  ExpectWriteFails(w, "tensor 'short': producer wrote 12 bytes, expected 16");
}

TEST(GgufWriter, FailsWhenAProducerWritesTooMany) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("long", DType::kF32, {2}, [](ByteSink& sink) {
                 const float x[3] = {};
                 return sink.Write(x, sizeof x);
               }).ok());
  ExpectWriteFails(w, "producer wrote more than the declared 8 bytes");

  // Ignoring the sink's error does not help.
  GgufWriter w2;
  ASSERT_TRUE(w2.AddTensor("sneaky", DType::kF32, {1}, [](ByteSink& sink) {
                  const float x[2] = {};
                  (void)sink.Write(x, sizeof x);
                  return Status::Ok();
                }).ok());
  ExpectWriteFails(w2, "tensor 'sneaky': producer wrote 8 bytes, expected 4");
}

TEST(GgufWriter, PassesOnAProducerError) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("bad", DType::kF32, {1}, [](ByteSink&) { return Status::Error("source tensor missing"); }).ok());
  ExpectWriteFails(w, "producing tensor 'bad': source tensor missing");
}

TEST(GgufWriter, ReportsAnUnwritablePath) {
  GgufWriter w;
  Status s = w.Write("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create '/nonexistent-dir/x.gguf.tmp'"), std::string::npos) << s.message();
}

TEST(GgufWriter, AddTensorValidatesTheDeclaration) {
  GgufWriter w;
  auto err = [&](const std::string& name, DType type, std::vector<int64_t> ne) {
    return w.AddTensor(name, type, ne, [](ByteSink&) { return Status::Ok(); }).message();
  };
  EXPECT_NE(err("t", DType::kF32, {}).find("has 0 dimensions"), std::string::npos);
  EXPECT_NE(err("t", DType::kF32, {1, 1, 1, 1, 1}).find("has 5 dimensions"), std::string::npos);
  EXPECT_NE(err("t", DType::kF32, {4, 0}).find("invalid dimension 1 = 0"), std::string::npos);
  EXPECT_NE(err("t", DType::kF32, {-4}).find("invalid dimension 0 = -4"), std::string::npos);
  EXPECT_NE(err("t", DType::kF32, {1LL << 40, 1LL << 40}).find("shape overflows"), std::string::npos);
  EXPECT_NE(err("t", DType::kQ8_0, {33}).find("not a multiple of its block size 32"), std::string::npos);
  EXPECT_NE(err("t", static_cast<DType>(4), {4}).find("unknown tensor type id 4"), std::string::npos);
  EXPECT_NE(err("", DType::kF32, {4}).find("needs a name"), std::string::npos);
  EXPECT_NE(err(std::string(64, 'n'), DType::kF32, {4}).find("at most 63"), std::string::npos);
  EXPECT_TRUE(err(std::string(63, 'n'), DType::kF32, {4}).empty());
  EXPECT_TRUE(err("t", DType::kF32, {4}).empty());
  EXPECT_NE(err("t", DType::kF32, {4}).find("duplicate tensor name 't'"), std::string::npos);
  EXPECT_NE(w.AddTensor("p", DType::kF32, {1}, nullptr).message().find("no data producer"), std::string::npos);
  EXPECT_NE(w.AddTensorData("d", DType::kF32, {1}, nullptr).message().find("has no data"), std::string::npos);
}

// Multi-GB output, streamed: the writer's memory stays flat and offsets past 4 GiB are right.
// Opt-in (GEMLET_GGUF_BIG_TEST=1): it writes 4.5 GiB to the temp folder.
TEST(GgufWriter, StreamsAMultiGigabyteFile) {
  if (std::getenv("GEMLET_GGUF_BIG_TEST") == nullptr) GTEST_SKIP() << "set GEMLET_GGUF_BIG_TEST=1 to run";
  constexpr int64_t kRow = 1 << 20;  // 1M floats = 4 MiB per row
  constexpr int64_t kRows = 1152;    // 4.5 GiB
  GgufWriter w;
  auto produce = [](ByteSink& sink) -> Status {
    std::vector<float> row(kRow);
    for (int64_t r = 0; r < kRows; ++r) {
      row[0] = static_cast<float>(r);
      row[kRow - 1] = -static_cast<float>(r);
      RETURN_IF_ERROR(sink.Write(row.data(), row.size() * sizeof(float)));
    }
    return Status::Ok();
  };
  ASSERT_TRUE(w.AddTensor("big", DType::kF32, {kRow, kRows}, produce).ok());
  const float tail[3] = {7, 8, 9};
  ASSERT_TRUE(w.AddTensorData("tail", DType::kF32, {3}, tail).ok());
  const std::string path = TempPath("big.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 256 * 1024) << "peak RSS in KiB";
  {
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    const GgufTensor* big = (*f)->FindTensor("big");
    const float* x = reinterpret_cast<const float*>(big->data);
    EXPECT_EQ(x[(kRows - 1) * kRow], static_cast<float>(kRows - 1));
    EXPECT_EQ(x[kRows * kRow - 1], -static_cast<float>(kRows - 1));
    const GgufTensor* t = (*f)->FindTensor("tail");
    EXPECT_EQ(t->offset, static_cast<uint64_t>(kRow * kRows * 4));
    EXPECT_EQ(reinterpret_cast<const float*>(t->data)[2], 9.0f);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gemlet
