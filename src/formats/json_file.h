#pragma once
// JSON files and texts a user hands us (configs, tokenizers, safetensors headers, shard indexes).
// nlohmann's parser throws more than parse_error: a number no double holds (1e400) is out_of_range.
// These catch every json::exception so that a bad file is an rf::Error naming it, never an abort.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace rf {

// Parses `text`, `part` of `source`; a failure throws rf::Error "<source>: <part> is not valid JSON: <why>".
nlohmann::json parse_json(std::string_view text, std::string_view source, std::string_view part);

// Reads and parses the file at `path`: "<path>: the file is not valid JSON: <why>".
nlohmann::json read_json_file(const std::string& path);

}  // namespace rf
