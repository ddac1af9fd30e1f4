#pragma once
// OpenAI's POST /v1/embeddings for the served decoder model: `input` as a string, strings, token
// ids or lists of them (up to 2048), each embedded through the engine as the checkpoint pools
// (engine/embedding.h); `encoding_format` float or base64 (little-endian float32, as OpenAI's
// clients decode it); `dimensions` where the model was trained for shorter vectors.
#include <nlohmann/json.hpp>

#include "server/model_service.h"

namespace rf::server {

// The response body; ApiError 400 naming the field at fault, 429 when the queue is full.
nlohmann::json create_embeddings(ModelService& model, const nlohmann::json& body);

}  // namespace rf::server
