// POST /v1/embeddings over real HTTP with the demo model: OpenAI's shape, base64 that decodes to
// the float vectors, a batch that gets each text's own vector, and 400s naming the field.
#include <gtest/gtest.h>

#include <cstring>

#include "server/base64.h"
#include "test_server.h"

namespace rf::server::testing {
namespace {

class EmbeddingsApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(demo_service()); }
  static void TearDownTestSuite() { delete server_; }
  static json post(const json& body, int expected_status = 200) {
    auto res = server_->client().Post("/v1/embeddings", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << res->body;
    return json::parse(res->body);
  }
  static TestServer* server_;
};
TestServer* EmbeddingsApi::server_ = nullptr;

TEST_F(EmbeddingsApi, HasOpenAisShapeAndUnitVectors) {
  const json reply = post({{"model", "kjv-llama"}, {"input", {"In the beginning", "And God said"}}});
  EXPECT_EQ(reply["object"], "list");
  EXPECT_EQ(reply["model"], "kjv-llama");
  ASSERT_EQ(reply["data"].size(), 2u);
  const std::size_t hidden = server_->model().hidden_size();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(reply["data"][i]["object"], "embedding");
    EXPECT_EQ(reply["data"][i]["index"], i);
    const auto vector = reply["data"][i]["embedding"].get<std::vector<double>>();
    ASSERT_EQ(vector.size(), hidden);
    double squares = 0;
    for (const double v : vector) squares += v * v;
    EXPECT_NEAR(squares, 1.0, 1e-5);
  }
  EXPECT_NE(reply["data"][0]["embedding"], reply["data"][1]["embedding"]);
  const int tokens = reply["usage"]["prompt_tokens"];
  EXPECT_GT(tokens, 2);
  EXPECT_EQ(reply["usage"]["total_tokens"], tokens);
}

TEST_F(EmbeddingsApi, EachTextGetsItsOwnVectorInABatchAndAsTokenIds) {
  const json alone = post({{"input", "And God said"}});
  const json batch = post({{"input", {"In the beginning", "And God said", "Let there be light"}}});
  EXPECT_EQ(batch["data"][1]["embedding"], alone["data"][0]["embedding"]);
  const auto ids = server_->model().tokenizer().encode("And God said", true);
  EXPECT_EQ(post({{"input", ids}})["data"][0]["embedding"], alone["data"][0]["embedding"]);
  EXPECT_EQ(post({{"input", {ids, ids}}})["data"][1]["embedding"], alone["data"][0]["embedding"]);
}

TEST_F(EmbeddingsApi, Base64IsTheFloatsLittleEndian) {
  const json floats = post({{"input", "Let there be light"}});
  const json encoded = post({{"input", "Let there be light"}, {"encoding_format", "base64"}});
  const auto bytes = base64_decode(encoded["data"][0]["embedding"].get<std::string>());
  ASSERT_TRUE(bytes);
  std::vector<float> decoded(bytes->size() / sizeof(float));
  std::memcpy(decoded.data(), bytes->data(), bytes->size());
  EXPECT_EQ(decoded, floats["data"][0]["embedding"].get<std::vector<float>>());
}

TEST_F(EmbeddingsApi, MistakesNameTheirField) {
  const std::pair<json, const char*> cases[] = {
      {json::object(), "input"},
      {{{"input", ""}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", {"ok", 5}}}, "input[1]"},
      {{{"input", {1, -2}}}, "input"},
      {{{"input", {{1, 99999999}}}}, "input[0]"},
      {{{"input", "hi"}, {"encoding_format", "hex"}}, "encoding_format"},
      {{{"input", "hi"}, {"dimensions", 8}}, "dimensions"},  // the demo model is no Matryoshka model
      {{{"input", "hi"}, {"dimensions", 0}}, "dimensions"},
  };
  for (const auto& [body, field] : cases) EXPECT_EQ(post(body, 400)["error"]["param"], field) << body.dump();
  EXPECT_EQ(post({{"input", "hi"}, {"model", "gpt-4"}}, 404)["error"]["param"], "model");
}

}  // namespace
}  // namespace rf::server::testing
