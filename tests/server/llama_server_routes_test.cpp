// llama-server's /tokenize, /detokenize and /props against the served model.
#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

class LlamaServerRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(demo_service()); }
  static void TearDownTestSuite() { delete server_; }
  static std::pair<int, json> post(const std::string& path, const json& body) {
    auto res = server_->client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    return {res ? res->status : 0, res ? json::parse(res->body) : json{}};
  }
  static TestServer* server_;
};
TestServer* LlamaServerRoutes::server_ = nullptr;

TEST_F(LlamaServerRoutes, TokensAreTheTokenizersAndComeBack) {
  const Tokenizer& tokenizer = server_->model().tokenizer();
  const std::string text = "And God said, Let there be light: and there was light.";
  for (const bool add_special : {false, true}) {
    const auto [status, body] = post("/tokenize", {{"content", text}, {"add_special", add_special}});
    ASSERT_EQ(status, 200) << body;
    const auto expected = tokenizer.encode(text, add_special);
    EXPECT_EQ(body["tokens"].get<std::vector<std::int32_t>>(), expected);
    const auto [back_status, back] = post("/detokenize", {{"tokens", body["tokens"]}});
    ASSERT_EQ(back_status, 200) << back;
    EXPECT_EQ(back["content"], tokenizer.decode(expected));
  }
  const auto [status, pieces] = post("/tokenize", {{"content", text}, {"with_pieces", true}});
  ASSERT_EQ(status, 200) << pieces;
  std::string joined;
  for (const auto& p : pieces["tokens"]) {
    EXPECT_EQ(p["piece"], tokenizer.decode({p["id"].get<std::int32_t>()}));
    joined += p["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, tokenizer.decode(tokenizer.encode(text, false)));
}

// /props: what llama-server's clients read first.
TEST_F(LlamaServerRoutes, PropsDescribeTheServedModel) {
  auto res = server_->client().Get("/props");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json props = json::parse(res->body);
  ModelService& model = server_->model();
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], model.max_context());
  // The demo model's generation_config.json says do_sample false: greedy.
  EXPECT_EQ(props["default_generation_settings"]["params"]["temperature"], 0.0);
  EXPECT_EQ(props["total_slots"], model.scheduler().max_running());
  EXPECT_EQ(props["model_path"], "kjv-llama");
  ASSERT_NE(model.chat(), nullptr);
  EXPECT_EQ(props["chat_template"], model.chat()->source());
  EXPECT_FALSE(props["chat_template"].get<std::string>().empty());
}

TEST_F(LlamaServerRoutes, BadRequestsNameTheirField) {
  EXPECT_EQ(post("/tokenize", json::object()).second["error"]["param"], "content");
  EXPECT_EQ(post("/tokenize", {{"content", 7}}).second["error"]["param"], "content");
  EXPECT_EQ(post("/tokenize", {{"content", "hi"}, {"parse_special", false}}).second["error"]["param"], "parse_special");
  EXPECT_EQ(post("/tokenize", {{"content", "hi"}, {"add_bos", true}}).second["error"]["param"], "add_bos");
  EXPECT_EQ(post("/detokenize", {{"tokens", {1, -2}}}).second["error"]["param"], "tokens");
  EXPECT_EQ(post("/detokenize", {{"tokens", {1, 999999}}}).second["error"]["param"], "tokens");
  EXPECT_EQ(post("/detokenize", {{"tokens", "1 2"}}).first, 400);
}

}  // namespace
}  // namespace rf::server::testing
