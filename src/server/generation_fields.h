#pragma once
// The generation settings an OpenAI-style request body carries (max_tokens, temperature, top_p,
// top_k, min_p, penalties, logit_bias, seed, stop, ignore_eos). What a request leaves out comes from the
// model's generation_config.json, then from llama.cpp's defaults, as `generate` takes them
// (GenerationDefaults::sampling).
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "model/checkpoint.h"

namespace rf::server {

// `default_max_tokens`: the limit when the request gives none (nullopt: until the context is full).
GenerateOptions generation_fields(const nlohmann::json& body, const GenerationDefaults& defaults,
                                  std::optional<int> default_max_tokens);

}  // namespace rf::server
