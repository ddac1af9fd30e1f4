#include "server/embeddings_api.h"

#include <cstring>
#include <future>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/base64.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace {

using nlohmann::json;

constexpr std::size_t kMostInputs = 2048;  // OpenAI's limit

// `input`'s texts as tokens, with where each came from (for errors).
std::vector<std::pair<std::string, std::vector<std::int32_t>>> inputs(const json& body, const Tokenizer& tokenizer) {
  const auto it = body.find("input");
  if (it == body.end() || it->is_null()) bad_field("input", "is required");
  auto text = [&](const json& value, const std::string& where) {
    if (value.get<std::string>().empty()) bad_field(where, "is an empty string: there is nothing to embed");
    return std::pair{where, tokenizer.encode(value.get<std::string>(), true)};
  };
  const json& input = *it;
  if (input.is_string()) return {text(input, "input")};
  const char* shape = "must be a string, an array of strings, an array of token ids or an array of those";
  if (!input.is_array() || input.empty()) bad_field("input", shape);
  if (input.front().is_number()) return {{"input", token_ids_field(input, "input")}};
  if (input.size() > kMostInputs) bad_field("input", fmt::format("may hold at most {} inputs", kMostInputs));
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> out;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::string where = fmt::format("input[{}]", i);
    if (input[i].is_string()) {
      out.push_back(text(input[i], where));
    } else if (input[i].is_array() && !input[i].empty()) {
      out.emplace_back(where, token_ids_field(input[i], where));
    } else {
      bad_field(where, shape);
    }
  }
  return out;
}

json encoded(const std::vector<float>& vector, bool base64) {
  if (!base64) return vector;
  std::vector<std::uint8_t> bytes(vector.size() * sizeof(float));
  std::memcpy(bytes.data(), vector.data(), bytes.size());  // little-endian hosts only (x86-64, AArch64)
  return base64_encode(bytes);
}

}  // namespace

json create_embeddings(ModelService& model, const json& body) {
  const std::size_t hidden = model.hidden_size();
  EmbeddingStyle style;
  try {
    style = model.embedding_style();
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("this model gives no embeddings: {}", e.what()), "model");
  }
  const auto format = string_field(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64") bad_field("encoding_format", "must be 'float' or 'base64'");
  const auto dimensions = integer_field(body, "dimensions", 1, static_cast<long long>(hidden));
  if (dimensions && *dimensions != static_cast<long long>(hidden) && !style.truncatable) {
    bad_field("dimensions", fmt::format("must be {}: this model was not trained for shorter vectors (Matryoshka)", hidden));
  }
  const auto texts = inputs(body, model.tokenizer());
  std::vector<std::future<std::vector<float>>> pending;
  std::size_t tokens = 0;
  for (const auto& [where, ids] : texts) {
    try {
      pending.push_back(model.scheduler().embed(ids, style.pooling, style.normalize));
    } catch (const Error& e) {
      bad_field(where, e.what());
    }
    if (!pending.back().valid()) throw ApiError(429, "the server is busy: too many requests are waiting; retry later", "", "queue_full");
    tokens += ids.size();
  }
  json data = json::array();
  for (std::size_t i = 0; i < pending.size(); ++i) {
    std::vector<float> vector;
    try {
      vector = pending[i].get();
    } catch (const Error& e) {
      throw ApiError(500, e.what());
    }
    if (dimensions) {
      vector.resize(*dimensions);
      if (style.normalize) normalize_l2(vector);
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", encoded(vector, format == "base64")}});
  }
  return {{"object", "list"}, {"data", std::move(data)}, {"model", model.id()},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

}  // namespace rf::server
