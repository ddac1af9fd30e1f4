#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "formats/test_helpers.h"

namespace rf {
namespace {

// A tensor whose bytes live in the caller's `storage`.
SafetensorsTensor tensor_of(const std::string& name, DType dtype, std::vector<std::uint64_t> shape,
                            const std::vector<std::uint8_t>& storage) {
  return {name, dtype, std::move(shape), storage.data(), storage.size()};
}

// A file with the given JSON header and `data_bytes` zero bytes of data.
void save_raw(const std::string& path, std::string_view header, std::size_t data_bytes) {
  test::Bytes().put<std::uint64_t>(header.size()).raw(header).zeros(data_bytes).save(path);
}

class SafetensorsTest : public test::ScratchTest {
 protected:
  // Writes one shard holding F32 tensors of 4 elements with the given names.
  void save_shard(const std::string& file, std::initializer_list<std::string> names) {
    std::vector<SafetensorsTensor> tensors;
    for (const auto& name : names) tensors.push_back(tensor_of(name, DType::F32, {4}, four_floats_));
    write_safetensors(path(file), tensors);
  }

  void save_index(std::string_view weight_map) {
    test::write_text(path("model.safetensors.index.json"),
                     std::string(R"({"metadata": {"total_size": 0}, "weight_map": )") + std::string(weight_map) + "}");
  }

 private:
  std::vector<std::uint8_t> four_floats_ = test::random_bytes(16, 9);
};

TEST_F(SafetensorsTest, RoundTripsEveryDTypeBitExact) {
  const std::vector<std::vector<std::uint8_t>> data = {test::random_bytes(3 * 4 * 4, 1),
                                                       test::random_bytes(5 * 2, 2),
                                                       test::random_bytes(2 * 3 * 2, 3),
                                                       test::random_bytes(4, 4),
                                                       {}};
  const std::vector<SafetensorsTensor> tensors = {
      tensor_of("model.embed_tokens.weight", DType::F32, {3, 4}, data[0]),
      tensor_of("f16", DType::F16, {5}, data[1]),
      tensor_of("bf16", DType::BF16, {2, 3, 1}, data[2]),
      tensor_of("scalar", DType::F32, {}, data[3]),
      tensor_of("empty", DType::F16, {0, 4}, data[4]),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "x\"y"}};
  const auto p = path("model.safetensors");
  write_safetensors(p, tensors, metadata);

  const SafetensorsFile file(p);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& expected : tensors) {
    SCOPED_TRACE(expected.name);
    const auto& t = file.tensors().at(expected.name);
    EXPECT_EQ(t.name, expected.name);
    EXPECT_EQ(t.dtype, expected.dtype);
    EXPECT_EQ(t.shape, expected.shape);
    ASSERT_EQ(t.size_bytes, expected.size_bytes);
    EXPECT_TRUE(std::ranges::equal(test::bytes_at(t.data, t.size_bytes), test::bytes_at(expected.data, t.size_bytes)));
  }

  // The reference implementation pads the header with spaces to a multiple of 8 bytes.
  const auto bytes = test::read_bytes(p);
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), sizeof header_length);
  EXPECT_EQ(header_length % 8, 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_length));
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
}

TEST_F(SafetensorsTest, WriterRejectsInconsistentTensors) {
  const std::vector<std::uint8_t> bytes(16);
  const auto p = path("w.safetensors");
  EXPECT_RF_ERROR(write_safetensors(p, {tensor_of("q", DType::Q8_0, {32}, bytes)}), p,
                  "tensor q has dtype q8_0; safetensors files hold only F32, F16, BF16");
  EXPECT_RF_ERROR(write_safetensors(p, {tensor_of("w", DType::F32, {5}, bytes)}), p,
                  "tensor w of shape [5] needs 20 bytes but has 16");
  EXPECT_RF_ERROR(
      write_safetensors(p, {tensor_of("w", DType::F32, {4}, bytes), tensor_of("w", DType::F32, {4}, bytes)}), p,
      "tensor name w is taken");
}

TEST_F(SafetensorsTest, EveryTruncationThrows) {
  const auto a = test::random_bytes(24, 1), b = test::random_bytes(8, 2);
  write_safetensors(path("full.safetensors"),
                    {tensor_of("a", DType::F32, {2, 3}, a), tensor_of("b", DType::BF16, {4}, b)}, {{"format", "pt"}});
  const auto full = test::read_bytes(path("full.safetensors"));
  ASSERT_NO_THROW(SafetensorsFile{path("full.safetensors")});

  const auto p = path("cut.safetensors");
  for (std::size_t size = 0; size < full.size(); ++size) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " of " + std::to_string(full.size()) + " bytes");
    test::write_bytes(p, {full.begin(), full.begin() + static_cast<std::ptrdiff_t>(size)});
    EXPECT_RF_ERROR(SafetensorsFile{p}, p);
  }
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastTheEnd) {
  const auto p = path("long.safetensors");
  test::Bytes().put<std::uint64_t>(1000).raw("{}").save(p);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "JSON header at offset 8 with 1000 bytes runs past the end of the file");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthOverTheLimit) {
  const auto p = path("huge.safetensors");
  test::Bytes().put<std::uint64_t>(std::uint64_t{1} << 40).raw("{}").save(p);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "header length 1099511627776 is over the 100000000 byte limit");
}

TEST_F(SafetensorsTest, RejectsFileShorterThanTheHeaderLength) {
  const auto p = path("tiny.safetensors");
  test::Bytes().raw("abc").save(p);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "header length at offset 0 with 8 bytes runs past the end of the file");
}

TEST_F(SafetensorsTest, RejectsInvalidJson) {
  const auto p = path("json.safetensors");
  save_raw(p, R"({"w": {"dtype": "F32",)", 0);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "the header is not valid JSON");
}

// nlohmann throws out_of_range, not parse_error, for a number no double holds: it must still be
// an rf::Error naming the file, never an exception that ends the process.
TEST_F(SafetensorsTest, RejectsANumberBeyondADouble) {
  const auto p = path("overflow.safetensors");
  save_raw(p, R"({"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})", 4);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "the header is not valid JSON: [json.exception.out_of_range.406]");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotAnObject) {
  const auto p = path("array.safetensors");
  save_raw(p, "[1, 2]", 0);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "the header is not a JSON object");
}

TEST_F(SafetensorsTest, RejectsMalformedTensorEntries) {
  const auto missing = path("missing.safetensors");
  save_raw(missing, R"({"w": {"dtype": "F32", "shape": [2]}})", 8);
  EXPECT_RF_ERROR(SafetensorsFile{missing}, missing, "tensor w has no data_offsets");

  const auto negative = path("negative.safetensors");
  save_raw(negative, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8);
  EXPECT_RF_ERROR(SafetensorsFile{negative}, negative,
                  "tensor w has shape with an item -2, expected non-negative integers");

  const auto nested = path("nested.safetensors");  // printed whole, this would overflow the stack
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  save_raw(nested, R"({"w": {"dtype": "F32", "shape": )" + deep + R"(, "data_offsets": [0, 8]}})", 8);
  EXPECT_RF_ERROR(SafetensorsFile{nested}, nested,
                  "has shape with an item a JSON array, expected non-negative integers");
  const auto nested_entry = path("nested_entry.safetensors");
  save_raw(nested_entry, R"({"v": )" + deep + "}", 8);
  EXPECT_RF_ERROR(SafetensorsFile{nested_entry}, nested_entry,
                  "tensor v has entry a JSON array, expected a JSON object");

  const auto three = path("three.safetensors");
  save_raw(three, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}})", 8);
  EXPECT_RF_ERROR(SafetensorsFile{three}, three, "tensor w has 3 data_offsets, expected 2");

  const auto scalar = path("scalar.safetensors");
  save_raw(scalar, R"({"w": 5})", 8);
  EXPECT_RF_ERROR(SafetensorsFile{scalar}, scalar, "tensor w has entry 5, expected a JSON object");
}

TEST_F(SafetensorsTest, RejectsMetadataWithNonStringValues) {
  const auto p = path("meta.safetensors");
  save_raw(p, R"({"__metadata__": {"format": "pt", "step": 5}})", 0);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "__metadata__ key step is 5, expected a string");
}

TEST_F(SafetensorsTest, RejectsUnsupportedDTypeNamingTheTensor) {
  const auto p = path("u8.safetensors");
  save_raw(p, R"({"mask": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", 2);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p,
                  "tensor mask has dtype U8, which rocmforge does not support (supported: F32, F16, BF16, F64, I32, I64)");
}

// Stable Diffusion 1.x checkpoints carry CLIP's position_ids as int64: the file opens, the tensor is
// listed with its type (and refused where a weight is read).
TEST_F(SafetensorsTest, ReadsIntegerTensors) {
  const auto p = path("i64.safetensors");
  save_raw(p, R"({"position_ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16);
  const SafetensorsFile file(p);
  const SafetensorsTensor& t = file.tensors().at("position_ids");
  EXPECT_EQ(t.dtype, DType::I64);
  EXPECT_EQ(t.size_bytes, 16u);
}

TEST_F(SafetensorsTest, SkipsOtherDTypesWhenAskedStillCheckingTheirOffsets) {
  const auto p = path("u8.safetensors");
  save_raw(p,
           R"({"mask": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
               "w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
           16);
  const SafetensorsFile file(p, OtherDTypes::skip);
  EXPECT_EQ(file.skipped(), (std::map<std::string, std::string>{{"mask", "U8"}}));
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_TRUE(file.tensors().contains("w"));

  const auto past = path("past.safetensors");
  save_raw(past, R"({"flag": {"dtype": "BOOL", "shape": [], "data_offsets": [8, 9]}})", 8);
  EXPECT_RF_ERROR(SafetensorsFile(past, OtherDTypes::skip), past,
                  "tensor flag has data_offsets [8, 9] past the end of the data section (8 bytes)");
}

TEST_F(SafetensorsTest, RejectsShapeThatDisagreesWithTheOffsets) {
  const auto p = path("size.safetensors");
  save_raw(p, R"({"w": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 16]}})", 16);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p,
                  "tensor w of shape [3, 2] and dtype BF16 needs 12 bytes, but its data_offsets [0, 16] hold 16");

  const auto overflow = path("overflow.safetensors");
  save_raw(overflow, R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})", 16);
  EXPECT_RF_ERROR(SafetensorsFile{overflow}, overflow,
                  "tensor w has shape [4294967296, 4294967296], whose size overflows");
}

TEST_F(SafetensorsTest, RejectsOffsetsPastTheDataSection) {
  const auto p = path("range.safetensors");
  save_raw(p, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 16);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p,
                  "tensor w has data_offsets [8, 24] past the end of the data section (16 bytes)");
}

TEST_F(SafetensorsTest, RejectsOffsetsThatEndBeforeTheyBegin) {
  const auto p = path("reversed.safetensors");
  save_raw(p, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 16);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "tensor w has data_offsets [8, 4], which end before they begin");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  const auto p = path("overlap.safetensors");
  save_raw(p,
           R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
               "b": {"dtype": "F16", "shape": [4], "data_offsets": [12, 20]},
               "empty": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
           20);
  EXPECT_RF_ERROR(SafetensorsFile{p}, p, "the data of tensors a", "and b", "overlap");
}

TEST_F(SafetensorsTest, SetReadsASingleFile) {
  save_shard("model.safetensors", {"a", "b"});
  const SafetensorsSet set(dir().string());
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(set.get("a").shape, (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(set.find("missing"), nullptr);
  EXPECT_RF_ERROR(set.get("lm_head.weight"), dir().string(), "tensor lm_head.weight not found");
}

TEST_F(SafetensorsTest, SetReadsShards) {
  save_shard("model-00001-of-00002.safetensors", {"a", "b"});
  save_shard("model-00002-of-00002.safetensors", {"c"});
  save_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"})");
  const SafetensorsSet set(dir().string());
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(set.get("c").size_bytes, 16u);
  EXPECT_NE(set.find("a"), nullptr);
}

TEST_F(SafetensorsTest, SetReadsOtherFileNames) {
  const SafetensorsNames names{"diffusion_pytorch_model.fp16.safetensors",
                               "diffusion_pytorch_model.safetensors.index.fp16.json"};
  EXPECT_RF_ERROR(SafetensorsSet(dir().string(), names), dir().string(),
                  "has neither diffusion_pytorch_model.fp16.safetensors nor "
                  "diffusion_pytorch_model.safetensors.index.fp16.json");
  save_shard("diffusion_pytorch_model.fp16-00001-of-00001.safetensors", {"a"});
  test::write_text(path(names.index),
                   R"({"weight_map": {"a": "diffusion_pytorch_model.fp16-00001-of-00001.safetensors"}})");
  EXPECT_EQ(SafetensorsSet(dir().string(), names).names(), (std::vector<std::string>{"a"}));
}

TEST_F(SafetensorsTest, SetRejectsAMissingShard) {
  save_shard("model-00001-of-00002.safetensors", {"a"});
  save_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  EXPECT_RF_ERROR(SafetensorsSet{dir().string()}, dir().string(),
                  "shard model-00002-of-00002.safetensors listed in model.safetensors.index.json does not exist");
}

TEST_F(SafetensorsTest, SetRejectsATensorInTheWrongShard) {
  save_shard("model-00001-of-00002.safetensors", {"a"});
  save_shard("model-00002-of-00002.safetensors", {"b"});
  save_index(R"({"a": "model-00002-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  EXPECT_RF_ERROR(
      SafetensorsSet{dir().string()}, dir().string(),
      "model.safetensors.index.json puts tensor a in model-00002-of-00002.safetensors, which does not contain it");
}

TEST_F(SafetensorsTest, SetRejectsATensorInTwoShards) {
  save_shard("model-00001-of-00002.safetensors", {"a", "b"});
  save_shard("model-00002-of-00002.safetensors", {"b"});
  save_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  EXPECT_RF_ERROR(SafetensorsSet{dir().string()}, dir().string(), "tensor b is in both",
                  "model-00001-of-00002.safetensors and", "model-00002-of-00002.safetensors");
}

TEST_F(SafetensorsTest, SetRejectsABadIndex) {
  test::write_text(path("model.safetensors.index.json"), R"({"metadata": {}})");
  EXPECT_RF_ERROR(SafetensorsSet{dir().string()}, path("model.safetensors.index.json"), "has no \"weight_map\" object");
}

TEST_F(SafetensorsTest, SetRejectsAnIndexWithANumberBeyondADouble) {
  test::write_text(path("model.safetensors.index.json"), R"({"metadata": {"total_size": 1e400}, "weight_map": {}})");
  EXPECT_RF_ERROR(SafetensorsSet{dir().string()}, path("model.safetensors.index.json"), "the index is not valid JSON");
}

TEST_F(SafetensorsTest, SetRejectsAFolderWithoutCheckpoint) {
  EXPECT_RF_ERROR(SafetensorsSet{dir().string()}, dir().string(),
                  "has neither model.safetensors nor model.safetensors.index.json");
}

}  // namespace
}  // namespace rf
