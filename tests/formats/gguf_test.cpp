#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <limits>

#include "formats/test_helpers.h"

namespace rf {
namespace {

using test::Bytes;

// GGML type ids the hand-made files use.
constexpr std::uint32_t kGgmlF32 = 0, kGgmlIQ2_XXS = 16;

GgufValue array_of(GgufType element_type, std::vector<GgufValue> items) {
  return {GgufType::ARRAY, std::make_shared<GgufArray>(GgufArray{element_type, std::move(items)})};
}

GgufValue str(std::string s) { return {GgufType::STRING, std::move(s)}; }
GgufValue u32(std::uint64_t v) { return {GgufType::U32, v}; }

// Values and nested arrays must match exactly, floats bit for bit.
void expect_same(const GgufValue& expected, const GgufValue& actual, const std::string& where) {
  ASSERT_EQ(expected.type, actual.type) << where;
  ASSERT_EQ(expected.value.index(), actual.value.index()) << where;
  if (const auto* d = std::get_if<double>(&expected.value)) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(*d), std::bit_cast<std::uint64_t>(std::get<double>(actual.value))) << where;
  } else if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&expected.value)) {
    const auto& b = std::get<std::shared_ptr<GgufArray>>(actual.value);
    ASSERT_EQ((*a)->element_type, b->element_type) << where;
    ASSERT_EQ((*a)->items.size(), b->items.size()) << where;
    for (std::size_t i = 0; i < b->items.size(); ++i) {
      expect_same((*a)->items[i], b->items[i], where + "[" + std::to_string(i) + "]");
    }
  } else {
    EXPECT_TRUE(expected.value == actual.value) << where;
  }
}

// One value of every scalar type, at the edges of its range.
std::vector<std::pair<std::string, GgufValue>> scalar_values() {
  return {
      {"v.u8", {GgufType::U8, std::uint64_t{255}}},
      {"v.i8", {GgufType::I8, std::int64_t{-128}}},
      {"v.u16", {GgufType::U16, std::uint64_t{65535}}},
      {"v.i16", {GgufType::I16, std::int64_t{-32768}}},
      {"v.u32", {GgufType::U32, std::uint64_t{std::numeric_limits<std::uint32_t>::max()}}},
      {"v.i32", {GgufType::I32, std::int64_t{std::numeric_limits<std::int32_t>::min()}}},
      {"v.f32", {GgufType::F32, double{-1.5e-40f}}},  // a float subnormal, exact in both widths
      {"v.bool", {GgufType::BOOL, true}},
      {"v.string", str(std::string("h\xc3\xa9llo\0world", 12))},
      {"v.u64", {GgufType::U64, std::numeric_limits<std::uint64_t>::max()}},
      {"v.i64", {GgufType::I64, std::numeric_limits<std::int64_t>::min()}},
      {"v.f64", {GgufType::F64, 0.1}},
  };
}

// Offset of a GGUF-encoded string (length prefix and bytes) in `bytes`, or npos.
std::size_t find_encoded(const std::vector<std::uint8_t>& bytes, std::string_view s) {
  const auto needle = Bytes().put<std::uint64_t>(s.size()).raw(s).bytes();
  const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  return it == bytes.end() ? std::string::npos : static_cast<std::size_t>(it - bytes.begin());
}

// Hand-made GGUF headers, for files the writer cannot produce.
class RawGguf : public test::ByteBuilder<RawGguf> {
 public:
  RawGguf& header(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
    return raw("GGUF").put(version).put(tensors).put(kvs);
  }
  RawGguf& string(std::string_view s) { return put<std::uint64_t>(s.size()).raw(s); }
  RawGguf& kv_u32(std::string_view key, std::uint32_t value) {
    return string(key).put(static_cast<std::uint32_t>(GgufType::U32)).put(value);
  }
  RawGguf& tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t ggml_type,
                  std::uint64_t offset) {
    string(name).put(static_cast<std::uint32_t>(dims.size()));
    for (const auto d : dims) put(d);
    return put(ggml_type).put(offset);
  }
};

// A file with one F32 tensor "w" of the given dims at `offset`, followed by `data_bytes` of data.
void save_one_tensor(const std::string& path, std::vector<std::uint64_t> dims, std::uint32_t ggml_type,
                     std::uint64_t offset, std::size_t data_bytes, std::string_view name = "w") {
  RawGguf f;
  f.header(3, 1, 0).tensor(name, std::move(dims), ggml_type, offset);
  f.pad_to(32);
  f.zeros(data_bytes).save(path);
}

class GgufTest : public test::ScratchTest {};

TEST_F(GgufTest, RoundTripsEveryMetadataTypeInInsertionOrder) {
  GgufWriter writer;
  std::vector<std::pair<std::string, GgufValue>> expected;
  for (const auto& [key, value] : scalar_values()) {
    expected.emplace_back(key, value);
    expected.emplace_back("array." + key, array_of(value.type, {value, value}));
  }
  expected.emplace_back("array.empty", array_of(GgufType::F64, {}));
  const GgufValue minus_seven{GgufType::I16, std::int64_t{-7}};
  expected.emplace_back(
      "array.nested", array_of(GgufType::ARRAY, {
                                                    array_of(GgufType::STRING, {str("a"), str("")}),
                                                    array_of(GgufType::STRING, {}),
                                                    array_of(GgufType::ARRAY, {array_of(GgufType::I16, {minus_seven})}),
                                                }));
  for (const auto& [key, value] : expected) writer.set(key, value);
  writer.set("v.u8", {GgufType::U8, std::uint64_t{7}});  // replacing keeps the first position
  expected.front().second = {GgufType::U8, std::uint64_t{7}};
  writer.write(path("m.gguf"));

  const GgufFile gguf(path("m.gguf"));
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.alignment(), 32u);
  ASSERT_EQ(gguf.metadata().size(), expected.size());
  for (const auto& [key, value] : expected) {
    ASSERT_NE(gguf.find(key), nullptr) << key;
    expect_same(value, *gguf.find(key), key);
  }
  const auto bytes = test::read_bytes(path("m.gguf"));
  std::size_t previous = 0;
  for (const auto& [key, value] : expected) {
    const auto at = find_encoded(bytes, key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_GT(at, previous) << key << " is out of insertion order";
    previous = at;
  }
}

TEST_F(GgufTest, RoundTripsEveryTensorTypeBitExact) {
  const auto& dtypes = kWeightDTypes;
  GgufWriter writer;
  std::vector<std::vector<std::uint8_t>> data;
  for (const auto dtype : dtypes) {
    const std::vector<std::uint64_t> dims = {dtype_info(dtype).block_elems * 3, 2, 1, 3};
    data.push_back(test::random_bytes(row_bytes(dtype, dims[0]) * 6, static_cast<std::uint32_t>(dtype)));
    writer.add_tensor(std::string("t.") + std::string(dtype_name(dtype)), dims, dtype, data.back());
  }
  writer.write(path("t.gguf"));

  const GgufFile gguf(path("t.gguf"));
  ASSERT_EQ(gguf.tensors().size(), std::size(dtypes));
  for (std::size_t i = 0; i < std::size(dtypes); ++i) {
    const auto& t = gguf.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(&gguf.tensor(t.name), &t);
    EXPECT_EQ(t.dtype, dtypes[i]);
    EXPECT_EQ(t.dims, (std::vector<std::uint64_t>{dtype_info(dtypes[i]).block_elems * 3, 2, 1, 3}));
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 32, 0u);
    ASSERT_EQ(t.size_bytes, data[i].size());
    EXPECT_TRUE(std::ranges::equal(test::bytes_at(t.data, t.size_bytes), data[i]));
  }
}

TEST_F(GgufTest, WritesAndReadsACustomAlignment) {
  GgufWriter writer;
  writer.add_tensor("a", {3}, DType::F32, test::random_bytes(12, 1));
  writer.add_tensor("b", {5}, DType::F16, test::random_bytes(10, 2));
  writer.write(path("a.gguf"), 256);

  const GgufFile gguf(path("a.gguf"));
  EXPECT_EQ(gguf.alignment(), 256u);
  EXPECT_EQ(gguf.get_uint("general.alignment"), 256u);
  EXPECT_EQ(gguf.find("general.alignment")->type, GgufType::U32);
  EXPECT_EQ(gguf.tensor("b").offset, 256u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(gguf.tensor("b").data) % 256, 0u);
}

TEST_F(GgufTest, ReadsAFileWithoutTensorsOrMetadata) {
  GgufWriter().write(path("empty.gguf"));
  const GgufFile gguf(path("empty.gguf"));
  EXPECT_TRUE(gguf.metadata().empty());
  EXPECT_TRUE(gguf.tensors().empty());
}

TEST_F(GgufTest, ReadsVersion2) {
  const auto data = test::random_bytes(8 * 4, 3);
  RawGguf f;
  f.header(2, 1, 2);
  f.string("general.architecture").put(static_cast<std::uint32_t>(GgufType::STRING)).string("llama");
  f.kv_u32("llama.block_count", 2);
  f.tensor("w", {4, 2}, kGgmlF32, 0).pad_to(32);
  f.raw({reinterpret_cast<const char*>(data.data()), data.size()});
  f.save(path("v2.gguf"));

  const GgufFile gguf(path("v2.gguf"));
  EXPECT_EQ(gguf.version(), 2u);
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf.get_uint("llama.block_count"), 2u);
  const auto& w = gguf.tensor("w");
  EXPECT_EQ(w.dims, (std::vector<std::uint64_t>{4, 2}));
  EXPECT_EQ(w.dtype, DType::F32);
  EXPECT_TRUE(std::ranges::equal(test::bytes_at(w.data, w.size_bytes), data));
}

TEST_F(GgufTest, TypedGettersConvertCompatibleTypes) {
  GgufWriter writer;
  writer.set("u8", {GgufType::U8, std::uint64_t{200}});
  writer.set("u64", {GgufType::U64, std::uint64_t{1} << 40});
  writer.set("i32", {GgufType::I32, std::int64_t{7}});
  writer.set("f32", {GgufType::F32, 0.5});
  writer.set("b", {GgufType::BOOL, false});
  writer.set("s", str("text"));
  writer.set("strings", array_of(GgufType::STRING, {str("x"), str("y")}));
  writer.set("f32s", array_of(GgufType::F32, {{GgufType::F32, 1.25}, {GgufType::F32, -2.0}}));
  writer.set("i8s", array_of(GgufType::I8, {{GgufType::I8, std::int64_t{-1}}, {GgufType::I8, std::int64_t{3}}}));
  writer.set("u64s", array_of(GgufType::U64, {{GgufType::U64, std::uint64_t{5}}}));
  writer.write(path("g.gguf"));

  const GgufFile gguf(path("g.gguf"));
  EXPECT_EQ(gguf.get_uint("u8"), 200u);
  EXPECT_EQ(gguf.get_uint("u64"), std::uint64_t{1} << 40);
  EXPECT_EQ(gguf.get_uint("i32"), 7u);
  EXPECT_EQ(gguf.get_uint_opt("absent"), std::nullopt);
  EXPECT_EQ(gguf.get_float_opt("f32"), 0.5);
  EXPECT_EQ(gguf.get_float_opt("i32"), 7.0);
  EXPECT_EQ(gguf.get_float_opt("u8"), 200.0);
  EXPECT_EQ(gguf.get_float_opt("absent"), std::nullopt);
  EXPECT_EQ(gguf.get_bool_opt("b"), false);
  EXPECT_EQ(gguf.get_bool_opt("absent"), std::nullopt);
  EXPECT_EQ(gguf.get_string("s"), "text");
  EXPECT_EQ(gguf.get_string_opt("absent"), std::nullopt);
  EXPECT_EQ(gguf.get_string_array("strings"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(gguf.get_float_array("f32s"), (std::vector<double>{1.25, -2.0}));
  EXPECT_EQ(gguf.get_float_array("i8s"), (std::vector<double>{-1.0, 3.0}));
  EXPECT_EQ(gguf.get_int_array("i8s"), (std::vector<std::int64_t>{-1, 3}));
  EXPECT_EQ(gguf.get_int_array("u64s"), (std::vector<std::int64_t>{5}));
}

TEST_F(GgufTest, TypedGettersRejectIncompatibleTypesNamingTheKey) {
  GgufWriter writer;
  writer.set("neg", {GgufType::I32, std::int64_t{-3}});
  writer.set("s", str("text"));
  writer.set("b", {GgufType::BOOL, true});
  writer.set("n", u32(5));
  writer.set("u32s", array_of(GgufType::U32, {u32(1)}));
  writer.set("no_u32s", array_of(GgufType::U32, {}));
  writer.set("strings", array_of(GgufType::STRING, {str("x")}));
  writer.set("big", array_of(GgufType::U64, {{GgufType::U64, std::uint64_t{1}}, {GgufType::U64, ~std::uint64_t{0}}}));
  writer.write(path("g.gguf"));
  const auto p = path("g.gguf");
  const GgufFile gguf(p);

  EXPECT_RF_ERROR(gguf.get_uint("neg"), p, "metadata key neg is i32 -3, expected a non-negative integer");
  EXPECT_RF_ERROR(gguf.get_uint("s"), p, "metadata key s is a string, expected a non-negative integer");
  EXPECT_RF_ERROR(gguf.get_uint("absent"), p, "metadata key absent is missing");
  EXPECT_RF_ERROR(gguf.get_float_opt("b"), p, "metadata key b is a bool, expected a number");
  EXPECT_RF_ERROR(gguf.get_bool_opt("n"), p, "metadata key n is u32 5, expected a bool");
  EXPECT_RF_ERROR(gguf.get_string("n"), p, "metadata key n is u32 5, expected a string");
  EXPECT_RF_ERROR(gguf.get_string_opt("strings"), p, "metadata key strings is an array of string, expected a string");
  EXPECT_RF_ERROR(gguf.get_string("absent"), p, "metadata key absent is missing");
  EXPECT_RF_ERROR(gguf.get_string_array("n"), p, "metadata key n is u32 5, expected an array of strings");
  EXPECT_RF_ERROR(gguf.get_string_array("u32s"), p,
                  "metadata key u32s is an array of u32, expected an array of strings");
  EXPECT_RF_ERROR(gguf.get_string_array("no_u32s"), p, "metadata key no_u32s is an array of u32");
  EXPECT_RF_ERROR(gguf.get_float_array("strings"), p,
                  "metadata key strings is an array of string, expected an array of numbers");
  EXPECT_RF_ERROR(gguf.get_int_array("big"), p,
                  "metadata key big item 1 is u64 18446744073709551615, which is out of range");
  EXPECT_RF_ERROR(gguf.get_int_array("absent"), p, "metadata key absent is missing");
  EXPECT_RF_ERROR(gguf.tensor("missing.weight"), p, "tensor missing.weight not found");
  EXPECT_EQ(gguf.find_tensor("missing.weight"), nullptr);
  EXPECT_EQ(gguf.find("absent"), nullptr);
}

TEST_F(GgufTest, EveryTruncationThrows) {
  GgufWriter writer;
  writer.set("general.architecture", str("llama"));
  writer.set("f", {GgufType::F64, 1.0});
  writer.set("tokens", array_of(GgufType::STRING, {str("<s>"), str("hello")}));
  writer.set("nested", array_of(GgufType::ARRAY, {array_of(GgufType::I32, {{GgufType::I32, std::int64_t{1}}})}));
  writer.add_tensor("q", {32, 2}, DType::Q8_0, test::random_bytes(68, 1));  // padded to 96 bytes
  writer.add_tensor("f", {8, 4}, DType::F32, test::random_bytes(128, 2));   // ends the file without padding
  writer.write(path("full.gguf"));
  const auto full = test::read_bytes(path("full.gguf"));
  ASSERT_NO_THROW(GgufFile{path("full.gguf")});

  // Every cut, in the header or in the data, leaves something out that the reader needs.
  const auto p = path("cut.gguf");
  for (std::size_t size = 0; size < full.size(); ++size) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " of " + std::to_string(full.size()) + " bytes");
    test::write_bytes(p, {full.begin(), full.begin() + static_cast<std::ptrdiff_t>(size)});
    EXPECT_RF_ERROR(GgufFile{p}, p);
  }
}

TEST_F(GgufTest, RejectsWrongMagic) {
  const auto p = path("magic.gguf");
  Bytes().raw("GGML").put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(0).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "not a GGUF file", "GGML");
}

TEST_F(GgufTest, RejectsVersion1) {
  const auto p = path("v1.gguf");
  RawGguf().header(1, 0, 0).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "GGUF version 1 is not supported");
}

TEST_F(GgufTest, RejectsUnknownVersion) {
  const auto p = path("v4.gguf");
  RawGguf().header(4, 0, 0).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "unsupported GGUF version 4");
}

TEST_F(GgufTest, RejectsBigEndianFiles) {
  const auto p = path("be.gguf");
  RawGguf().header(__builtin_bswap32(3), 0, 0).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "big-endian");
}

TEST_F(GgufTest, RejectsHugeTensorCount) {
  const auto p = path("count.gguf");
  RawGguf().header(3, std::uint64_t{1} << 60, 0).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "tensor count 1152921504606846976", "corrupt");
}

TEST_F(GgufTest, RejectsHugeMetadataCount) {
  const auto p = path("count.gguf");
  RawGguf().header(3, 0, std::uint64_t{1} << 60).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key/value count 1152921504606846976", "corrupt");
}

TEST_F(GgufTest, RejectsHugeArrayLength) {
  const auto p = path("count.gguf");
  RawGguf f;
  f.header(3, 0, 1).string("tokens").put(static_cast<std::uint32_t>(GgufType::ARRAY));
  f.put(static_cast<std::uint32_t>(GgufType::U8)).put(std::uint64_t{1} << 60).zeros(64);
  f.save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "array length 1152921504606846976", "corrupt");
}

TEST_F(GgufTest, RejectsHugeStringLength) {
  const auto key = path("key.gguf");
  RawGguf().header(3, 0, 1).put(std::uint64_t{1} << 60).zeros(64).save(key);
  EXPECT_RF_ERROR(GgufFile{key}, key, "metadata key at offset 32", "runs past the end of the file");

  const auto value = path("value.gguf");
  RawGguf f;
  f.header(3, 0, 1).string("name").put(static_cast<std::uint32_t>(GgufType::STRING)).put(~std::uint64_t{0}).zeros(8);
  f.save(value);
  EXPECT_RF_ERROR(GgufFile{value}, value, "metadata string", "runs past the end of the file");
}

TEST_F(GgufTest, RejectsUnknownValueType) {
  const auto p = path("type.gguf");
  RawGguf().header(3, 0, 1).string("general.name").put<std::uint32_t>(13).zeros(8).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key general.name has unknown value type 13");

  const auto element = path("element.gguf");
  RawGguf f;
  f.header(3, 0, 1).string("list").put(static_cast<std::uint32_t>(GgufType::ARRAY)).put<std::uint32_t>(99);
  f.put<std::uint64_t>(0).save(element);
  EXPECT_RF_ERROR(GgufFile{element}, element, "metadata key list has unknown value type 99");
}

TEST_F(GgufTest, RejectsDeeplyNestedArrays) {
  GgufValue value = array_of(GgufType::U8, {});
  for (int i = 0; i < 20; ++i) value = array_of(GgufType::ARRAY, {value});
  GgufWriter writer;
  writer.set("deep", value);
  const auto p = path("deep.gguf");
  writer.write(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key deep nests arrays more than 8 deep");
}

TEST_F(GgufTest, RejectsInvalidBool) {
  const auto p = path("bool.gguf");
  RawGguf().header(3, 0, 1).string("flag").put(static_cast<std::uint32_t>(GgufType::BOOL)).put<std::uint8_t>(2).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key flag has bool value 2");
}

TEST_F(GgufTest, RejectsDuplicateKeys) {
  const auto p = path("dup.gguf");
  RawGguf().header(3, 0, 2).kv_u32("llama.block_count", 1).kv_u32("llama.block_count", 2).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key llama.block_count appears twice");
}

TEST_F(GgufTest, RejectsBadAlignment) {
  for (const std::uint32_t alignment : {0u, 48u}) {
    const auto p = path("align" + std::to_string(alignment) + ".gguf");
    RawGguf().header(3, 0, 1).kv_u32("general.alignment", alignment).save(p);
    EXPECT_RF_ERROR(GgufFile{p}, p, "general.alignment is " + std::to_string(alignment), "not a power of two");
  }
  const auto p = path("align_string.gguf");
  RawGguf()
      .header(3, 0, 1)
      .string("general.alignment")
      .put(static_cast<std::uint32_t>(GgufType::STRING))
      .string("32")
      .save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "metadata key general.alignment is a string, expected a non-negative integer");
}

TEST_F(GgufTest, RejectsMisalignedTensorOffset) {
  const auto p = path("misaligned.gguf");
  save_one_tensor(p, {4}, kGgmlF32, 16, 64);
  EXPECT_RF_ERROR(GgufFile{p}, p, "tensor w has data offset 16, which is not a multiple of the alignment 32");
}

TEST_F(GgufTest, RejectsTensorDataPastTheEnd) {
  const auto p = path("short.gguf");
  save_one_tensor(p, {64}, kGgmlF32, 0, 128);
  EXPECT_RF_ERROR(GgufFile{p}, p, "tensor w needs 256 bytes at data offset 0, but the data section has only 128");

  const auto far = path("far.gguf");  // an offset so large that offset + size would wrap around
  save_one_tensor(far, {64}, kGgmlF32, ~std::uint64_t{0} - 31, 256);
  EXPECT_RF_ERROR(GgufFile{far}, far, "tensor w needs 256 bytes at data offset 18446744073709551584");
}

TEST_F(GgufTest, RejectsUnsupportedTensorTypeNamingTheTensor) {
  const auto p = path("iq2_xxs.gguf");
  save_one_tensor(p, {256}, kGgmlIQ2_XXS, 0, 66, "blk.0.ffn_down.weight");
  EXPECT_RF_ERROR(GgufFile{p}, p,
                  "tensor blk.0.ffn_down.weight has type iq2_xxs, which rocmforge does not support "
                  "(supported: f32, f16, bf16, q8_0, q5_0, q5_1, q4_0, q4_1, iq4_nl, q6_k, q5_k, q4_k, q3_k, q2_k, "
                  "iq4_xs)");

  const auto unknown = path("unknown.gguf");
  save_one_tensor(unknown, {256}, 99, 0, 1024);
  EXPECT_RF_ERROR(GgufFile{unknown}, unknown, "tensor w has type 99 (unknown), which rocmforge does not support");
}

TEST_F(GgufTest, RejectsZeroDimension) {
  const auto p = path("zero.gguf");
  save_one_tensor(p, {4, 0}, kGgmlF32, 0, 32);
  EXPECT_RF_ERROR(GgufFile{p}, p, "tensor w has a zero dimension in [4, 0]");
}

TEST_F(GgufTest, RejectsBadDimensionCount) {
  const auto none = path("none.gguf");
  save_one_tensor(none, {}, kGgmlF32, 0, 32);
  EXPECT_RF_ERROR(GgufFile{none}, none, "tensor w has 0 dimensions; GGUF allows 1 to 4");

  const auto five = path("five.gguf");
  save_one_tensor(five, {1, 1, 1, 1, 1}, kGgmlF32, 0, 32);
  EXPECT_RF_ERROR(GgufFile{five}, five, "tensor w has 5 dimensions; GGUF allows 1 to 4");
}

TEST_F(GgufTest, RejectsOverflowingDimensions) {
  const auto elements = path("elements.gguf");
  save_one_tensor(elements, {std::uint64_t{1} << 32, std::uint64_t{1} << 32, 2}, kGgmlF32, 0, 32);
  EXPECT_RF_ERROR(GgufFile{elements}, elements,
                  "tensor w has dimensions [4294967296, 4294967296, 2] whose product overflows");

  const auto bytes = path("bytes.gguf");  // the element count fits, its size in bytes does not
  save_one_tensor(bytes, {std::uint64_t{1} << 62}, kGgmlF32, 0, 32);
  EXPECT_RF_ERROR(GgufFile{bytes}, bytes,
                  "tensor w has dimensions [4611686018427387904] whose size in bytes overflows");
}

TEST_F(GgufTest, RejectsInnerDimensionNotAMultipleOfTheBlock) {
  const auto p = path("block.gguf");
  save_one_tensor(p, {100, 2}, dtype_to_ggml(DType::Q4_K), 0, 1024);
  EXPECT_RF_ERROR(GgufFile{p}, p,
                  "tensor w has an innermost dimension of 100, which is not a multiple of the q4_k block size 256");
}

TEST_F(GgufTest, RejectsDuplicateTensorNames) {
  const auto p = path("dup.gguf");
  RawGguf f;
  f.header(3, 2, 0).tensor("w", {8}, kGgmlF32, 0).tensor("w", {8}, kGgmlF32, 32).pad_to(32);
  f.zeros(64).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "tensor w appears twice");
}

TEST_F(GgufTest, RejectsOverlappingTensorData) {
  const auto p = path("overlap.gguf");
  RawGguf f;
  f.header(3, 3, 0).tensor("a", {16}, kGgmlF32, 0).tensor("c", {8}, kGgmlF32, 96).tensor("b", {8}, kGgmlF32, 32);
  f.pad_to(32).zeros(128).save(p);
  EXPECT_RF_ERROR(GgufFile{p}, p, "the data of tensors a", "and b", "overlap");
}

TEST_F(GgufTest, WriterRejectsInconsistentInput) {
  GgufWriter writer;
  EXPECT_RF_ERROR(writer.add_tensor("w", {4}, DType::F32, std::vector<std::uint8_t>(3)), "GgufWriter",
                  "tensor w has 3 bytes of data, expected 16");
  EXPECT_RF_ERROR(writer.add_tensor("w", {4, 0}, DType::F32, {}), "GgufWriter", "tensor w has a zero dimension");
  writer.add_tensor("w", {4}, DType::F32, std::vector<std::uint8_t>(16));
  EXPECT_RF_ERROR(writer.add_tensor("w", {4}, DType::F32, std::vector<std::uint8_t>(16)), "GgufWriter",
                  "tensor w added twice");
  EXPECT_RF_ERROR(writer.write(path("a.gguf"), 24), path("a.gguf"), "alignment 24 is not a power of two");

  GgufWriter too_wide;
  too_wide.set("small", {GgufType::U8, std::uint64_t{300}});
  EXPECT_RF_ERROR(too_wide.write(path("b.gguf")), path("b.gguf"),
                  "metadata key small holds 300, which does not fit in u8");

  GgufWriter mismatched;
  mismatched.set("s", {GgufType::U32, std::string("x")});
  EXPECT_RF_ERROR(mismatched.write(path("c.gguf")), path("c.gguf"),
                  "metadata key s has type u32 but holds another kind of value");

  GgufWriter mixed;
  mixed.set("list", array_of(GgufType::STRING, {str("a"), u32(1)}));
  EXPECT_RF_ERROR(mixed.write(path("d.gguf")), path("d.gguf"),
                  "metadata key list is an array of string with an item of type u32");
}

}  // namespace
}  // namespace rf
