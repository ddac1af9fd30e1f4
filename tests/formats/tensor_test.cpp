#include "formats/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/test_helpers.h"

namespace rf {
namespace {

std::vector<std::string> names_of(const TensorSet& set) {
  std::vector<std::string> names;
  for (const auto& view : set) names.push_back(view.name);
  return names;
}

std::vector<std::uint64_t> dims_of(const TensorView& view) { return {view.dims().begin(), view.dims().end()}; }

class TensorSetTest : public test::ScratchTest {
 protected:
  // A safetensors file of F32 tensors with the given shapes, written in this order.
  void save_f32(const std::string& file, const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& shapes) {
    std::vector<SafetensorsTensor> tensors;
    for (const auto& [name, shape] : shapes) {
      std::uint64_t elements = 1;
      for (const auto d : shape) elements *= d;
      const auto& bytes = storage_.emplace_back(test::random_bytes(elements * 4, storage_.size()));
      tensors.push_back({name, DType::F32, shape, bytes.data(), bytes.size()});
    }
    write_safetensors(path(file), tensors);
  }

 private:
  std::vector<std::vector<std::uint8_t>> storage_;
};

TEST_F(TensorSetTest, ViewsAGgufOutermostFirstInFileOrder) {
  GgufWriter writer;
  writer.add_tensor("z.weight", {64, 3}, DType::Q8_0, test::random_bytes(3 * 2 * 34, 1));  // 3 rows of 2 blocks
  writer.add_tensor("a.norm", {5}, DType::F32, test::random_bytes(20, 2));
  writer.add_tensor("m.cube", {4, 3, 2, 1}, DType::F16, test::random_bytes(24 * 2, 3));
  writer.write(path("model.gguf"));
  const GgufFile gguf(path("model.gguf"));

  const TensorSet set(gguf);
  EXPECT_EQ(set.source(), gguf.path());
  EXPECT_EQ(names_of(set), (std::vector<std::string>{"z.weight", "a.norm", "m.cube"}));

  const TensorView& q = set.at("z.weight");
  EXPECT_EQ(q.dtype, DType::Q8_0);
  EXPECT_EQ(dims_of(q), (std::vector<std::uint64_t>{3, 64}));
  EXPECT_EQ(q.elements(), 192u);
  EXPECT_EQ(q.row_bytes(), 68u);
  EXPECT_EQ(q.bytes, 3 * q.row_bytes());
  EXPECT_EQ(q.data, gguf.tensor("z.weight").data);
  EXPECT_EQ(q.shape_string(), "[3, 64]");

  const TensorView& cube = set.at("m.cube");
  EXPECT_EQ(cube.n_dims, 4);
  EXPECT_EQ(cube.shape_string(), "[1, 2, 3, 4]");
  EXPECT_EQ(cube.bytes, 48u);
  EXPECT_EQ(set.at("a.norm").shape_string(), "[5]");
}

TEST_F(TensorSetTest, MissingNamesAreNullOrAnErrorNamingTheSource) {
  save_f32("model.safetensors", {{"w", {2, 2}}});
  const SafetensorsFile file(path("model.safetensors"));
  const TensorSet set(file);
  EXPECT_EQ(set.find("absent"), nullptr);
  EXPECT_NE(set.find("w"), nullptr);
  EXPECT_RF_ERROR(set.at("absent"), file.path(), "tensor absent not found");
}

TEST_F(TensorSetTest, ViewsOneSafetensorsFileInDataOrder) {
  save_f32("model.safetensors", {{"zeta", {2, 3}}, {"alpha", {4}}, {"scalar", {}}, {"mid", {1, 2, 1, 2}}});
  const SafetensorsFile file(path("model.safetensors"));
  const TensorSet set(file);
  EXPECT_EQ(names_of(set), (std::vector<std::string>{"zeta", "alpha", "scalar", "mid"}));
  for (const auto& view : set) {
    SCOPED_TRACE(view.name);
    const auto& t = file.tensors().at(view.name);
    EXPECT_EQ(dims_of(view), t.shape);
    EXPECT_EQ(view.bytes, t.size_bytes);
    EXPECT_EQ(view.data, t.data);
    EXPECT_EQ(view.bytes, view.elements() * 4);
  }
  const TensorView& scalar = set.at("scalar");
  EXPECT_EQ(scalar.n_dims, 0);
  EXPECT_EQ(scalar.elements(), 1u);
  EXPECT_EQ(scalar.shape_string(), "[]");
}

TEST_F(TensorSetTest, ViewsShardsInTheOrderOfTheirNames) {
  save_f32("model-00001-of-00002.safetensors", {{"b", {2}}, {"a", {3}}});
  save_f32("model-00002-of-00002.safetensors", {{"0", {4}}});
  // The index lists the second shard first (by tensor name): file order still follows the shards.
  test::write_text(path("model.safetensors.index.json"),
                   R"({"weight_map": {"0": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",
                                      "b": "model-00001-of-00002.safetensors"}})");
  const SafetensorsSet shards(dir().string());
  const TensorSet set(shards);
  EXPECT_EQ(set.source(), dir().string());
  EXPECT_EQ(names_of(set), (std::vector<std::string>{"b", "a", "0"}));
  EXPECT_EQ(set.at("0").data, shards.get("0").data);
  EXPECT_EQ(set.at("a").bytes, 12u);
  EXPECT_RF_ERROR(set.at("c"), dir().string(), "tensor c not found");
}

TEST_F(TensorSetTest, RefusesMoreThanFourDimensionsNamingTheTensor) {
  save_f32("model.safetensors", {{"ok", {1, 1, 1, 1}}, {"conv3d.weight", {2, 1, 3, 1, 2}}});
  const SafetensorsFile file(path("model.safetensors"));
  EXPECT_RF_ERROR(TensorSet{file}, file.path(), "tensor conv3d.weight has 5 dimensions [2, 1, 3, 1, 2]",
                  "at most 4");
  // Through a folder the error names the file that holds the tensor.
  EXPECT_RF_ERROR(TensorSet{SafetensorsSet(dir().string())}, file.path(), "tensor conv3d.weight has 5 dimensions");
}

TEST_F(TensorSetTest, RefusesADuplicateName) {
  TensorSet set("synthetic");
  const float x = 1.0f;
  const std::uint64_t one = 1;
  set.add(make_tensor_view("synthetic", "a", DType::F32, {&one, 1}, 4, &x));
  EXPECT_RF_ERROR(set.add(make_tensor_view("synthetic", "a", DType::F32, {&one, 1}, 4, &x)), "synthetic",
                  "tensor a appears twice");
  EXPECT_EQ(set.size(), 1u);
}

TEST(FromF32, RoundsToNearestEvenInEachType) {
  // Exact ties (1 + half an ulp) go to the even neighbour, 1 + 1.5 ulp up to 1 + 2 ulp.
  const std::vector<float> values = {1.0f, 1.0f + 0x1p-11f, 1.0f + 0x1.8p-10f, -2.0f};
  std::vector<std::uint16_t> f16(values.size()), bf16(values.size());
  from_f32(DType::F16, values, f16.data());
  EXPECT_EQ(f16, (std::vector<std::uint16_t>{0x3C00, 0x3C00, 0x3C02, 0xC000}));
  const std::vector<float> bf16_values = {1.0f, 1.0f + 0x1p-8f, 1.0f + 0x1.8p-7f, -2.0f};
  from_f32(DType::BF16, bf16_values, bf16.data());
  EXPECT_EQ(bf16, (std::vector<std::uint16_t>{0x3F80, 0x3F80, 0x3F82, 0xC000}));
  std::vector<float> f32(values.size(), -1.0f);
  from_f32(DType::F32, values, f32.data());
  EXPECT_EQ(f32, values);
}

TEST(FromF32, RefusesQuantizedTypesNamingThem) {
  std::vector<std::uint8_t> out(64);
  const std::vector<float> values(32, 1.0f);
  EXPECT_RF_ERROR(from_f32(DType::Q8_0, values, out.data()), "from_f32", "q8_0 is not f32, f16 or bf16");
}

}  // namespace
}  // namespace rf
