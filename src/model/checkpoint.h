#pragma once
// A loaded checkpoint: its config, every tensor by name (still in the files' memory maps, in their
// stored types), the Llama-family weights read from them, and the open files that keep those views
// valid. One loader serves Hugging Face folders and GGUF files; the backends only see LlamaWeights.
//
// Built as rf_checkpoint, above the model families (src/CMakeLists.txt): it reads their weights.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "model/config.h"
#include "model/sampling.h"
#include "models/llama/weights.h"

namespace rf {

class GgufFile;
class SafetensorsSet;

// Sampling defaults from generation_config.json (absent fields stay unset).
struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<bool> do_sample;

  // What a request that sets none of them samples with, `generate` and `serve` alike: these, then
  // llama.cpp's defaults (SamplingParams's); do_sample false makes it greedy.
  SamplingParams sampling() const {
    SamplingParams s;
    if (do_sample && !*do_sample) s.temperature = 0;
    else if (temperature) s.temperature = *temperature;
    s.top_p = top_p.value_or(s.top_p);
    s.min_p = min_p.value_or(s.min_p);
    s.repetition_penalty = repetition_penalty.value_or(s.repetition_penalty);
    s.top_k = top_k.value_or(s.top_k);
    return s;
  }
};

enum class CheckpointFormat { HuggingFace, Gguf, Memory };

class Checkpoint {
 public:
  // A Hugging Face folder (config.json + safetensors) or a .gguf file.
  static Checkpoint load(const std::string& path);
  // A checkpoint built in memory (synthetic benchmark models); `storage` owns what the weights point to.
  static Checkpoint from_memory(std::string name, ModelConfig config, LlamaWeights weights,
                                std::vector<std::vector<std::uint8_t>> storage);
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;

  const std::string& path() const { return path_; }
  CheckpointFormat format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  // Every tensor of the files, in file order. For a checkpoint built in memory: its weights under
  // their GGUF names (llama::Naming::Gguf), the tied output once.
  const TensorSet& tensors() const { return tensors_; }
  const GenerationDefaults& generation_defaults() const { return generation_; }
  const GgufFile* gguf() const { return gguf_.get(); }  // null for HF folders
  // Path of tokenizer.json for HF folders, empty for GGUF (whose vocabulary is inside).
  const std::string& tokenizer_json() const { return tokenizer_json_; }

  std::size_t parameter_count() const;
  std::size_t weight_bytes() const;
  // Distinct stored types of the 2-D weights with their share of the bytes, e.g. "q4_k 83%, q6_k 17%".
  std::string dtype_summary() const;

 private:
  Checkpoint() = default;
  std::string path_;
  CheckpointFormat format_ = CheckpointFormat::HuggingFace;
  ModelConfig config_;
  LlamaWeights weights_;
  GenerationDefaults generation_;
  std::string tokenizer_json_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsSet> safetensors_;
  std::vector<std::vector<std::uint8_t>> storage_;
  TensorSet tensors_;  // views into the files, the storage or weights_
};

}  // namespace rf
