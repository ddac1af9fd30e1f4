// The rocmforge binary as a user runs it: exit codes and messages for good and bad input.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "formats/dtype.h"

namespace {

using namespace rf::test::cli;
namespace fs = std::filesystem;

TEST(Cli, VersionNamesTheBuildAndItsBackends) {
  const CliRun r = run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("rocmforge 0.", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("backends: cpu"), std::string::npos) << r.output;
}

TEST(Cli, GenerateIsDeterministicForASeedAndReportsSpeed) {
  const std::string args = "generate -m " + kModels + "qwen3 -p 'Hello world' -n 12 --seed 7 --temp 0.9 --ignore-eos";
  const CliRun a = run(args), b = run(args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.substr(0, a.output.find("prompt:")), b.output.substr(0, b.output.find("prompt:")));
  EXPECT_NE(a.output.find("tokens/s"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("generation: 12 tokens"), std::string::npos) << a.output;
}

TEST(Cli, TokenizeJsonlMatchesTheReference) {
  std::ifstream in(kModels + "llama3/reference.json");
  const auto ref = nlohmann::json::parse(in);
  std::string input, expected;
  for (const auto& item : ref.at("hf_encodings")) {
    input += item.at("text").dump() + "\n";
    expected += item.at("ids").dump() + "\n";
  }
  const CliRun r = run("tokenize --jsonl -m " + kModels + "llama3", input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, expected);
}

TEST(Cli, PerplexityPrintsHowItScored) {
  const fs::path text = scratch_file("ppl.txt");
  std::ofstream(text) << "The quick brown fox jumps over the lazy dog. " << std::string(50, 'a');
  const CliRun one = run("perplexity -m " + kModels + "qwen2 -f " + text.string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("in one sequence"), std::string::npos) << one.output;
  const CliRun windows = run("perplexity -m " + kModels + "qwen2 --ctx 8 -f " + text.string());
  ASSERT_EQ(windows.exit_code, 0) << windows.output;
  EXPECT_NE(windows.output.find("windows of 8 tokens"), std::string::npos) << windows.output;
}

TEST(Cli, InfoDescribesAModel) {
  const CliRun r = run("info -m " + kModels + "llama3/model.q4_k_m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("architecture: llama"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weight types: q4_k"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("backends built: cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weight types supported: " + rf::weight_dtype_names()), std::string::npos) << r.output;
  EXPECT_NE(rf::weight_dtype_names().find("q5_0, q5_1, q4_0, q4_1, iq4_nl, q6_k, q5_k, q4_k, q3_k, q2_k, iq4_xs"),
            std::string::npos);
}

// A row of `info --tensors`: type, shape as printed ("[448, 256]"), elements and bytes.
struct TensorRow {
  std::string type, shape;
  std::uint64_t elements, bytes;
  bool operator==(const TensorRow&) const = default;
};

// The tensor rows of `info --tensors` output by name, and the names in the order printed.
std::map<std::string, TensorRow> tensor_rows(const std::string& output, std::vector<std::string>& order) {
  static const std::regex row(R"(^(\S+) +(\S+) +(\[[0-9, ]*\]) +([0-9]+) +([0-9]+)$)");
  std::map<std::string, TensorRow> rows;
  std::istringstream lines(output);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_match(line, m, row)) continue;
    rows[m[1]] = {m[2], m[3], std::stoull(m[4]), std::stoull(m[5])};
    order.push_back(m[1]);
  }
  return rows;
}

std::string shape_of(const std::vector<std::uint64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The totals line for these rows.
std::string totals(const std::map<std::string, TensorRow>& rows) {
  std::uint64_t elements = 0, bytes = 0;
  for (const auto& [name, r] : rows) {
    elements += r.elements;
    bytes += r.bytes;
  }
  return "total: " + std::to_string(rows.size()) + " tensors, " + std::to_string(elements) + " elements, " +
         std::to_string(bytes) + " bytes";
}

// The expected rows of a safetensors shard, read straight from its JSON header.
void add_shard_rows(const fs::path& shard, std::map<std::string, TensorRow>& rows) {
  std::ifstream in(shard, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  const auto tensors = nlohmann::json::parse(header);
  for (const auto& [name, entry] : tensors.items()) {
    if (name == "__metadata__") continue;
    const auto dims = entry["shape"].get<std::vector<std::uint64_t>>();
    std::uint64_t elements = 1;
    for (const auto d : dims) elements *= d;
    std::string type = entry["dtype"];
    for (auto& c : type) c = static_cast<char>(std::tolower(c));
    const auto offsets = entry["data_offsets"].get<std::vector<std::uint64_t>>();
    rows[name] = {type, shape_of(dims), elements, offsets[1] - offsets[0]};
  }
}

TEST(Cli, InfoListsTheTensorsOfShards) {
  const fs::path folder = kModels + "qwen3";
  std::map<std::string, TensorRow> expected;
  std::map<std::string, int> shard_of;
  for (int shard = 1; shard <= 3; ++shard) {
    const std::string file = "model-0000" + std::to_string(shard) + "-of-00003.safetensors";
    std::map<std::string, TensorRow> rows;
    add_shard_rows(folder / file, rows);
    for (const auto& [name, row] : rows) shard_of[name] = shard;
    expected.merge(rows);
  }
  ASSERT_EQ(expected.size(), 24u);

  const CliRun r = run("info --tensors -m " + folder.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> order;
  EXPECT_EQ(tensor_rows(r.output, order), expected) << r.output;
  ASSERT_EQ(order.size(), expected.size());
  for (std::size_t i = 1; i < order.size(); ++i) {
    EXPECT_LE(shard_of[order[i - 1]], shard_of[order[i]]) << order[i - 1] << " listed before " << order[i];
  }
  EXPECT_NE(r.output.find(totals(expected) + " ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("architecture: qwen3"), std::string::npos) << r.output;  // the summary stays
}

TEST(Cli, InfoListsTheTensorsOfAQuantizedGguf) {
  std::ifstream in(kModels + "llama3/config.json");
  const auto config = nlohmann::json::parse(in);
  const std::uint64_t hidden = config["hidden_size"], ffn = config["intermediate_size"], vocab = config["vocab_size"],
                      head_dim = config["head_dim"], layers = config["num_hidden_layers"],
                      kv = config["num_key_value_heads"].get<std::uint64_t>() * head_dim;
  // GGML's k-quants: blocks of 256 weights, 144 bytes for q4_k and 210 for q6_k (ggml-common.h).
  const auto k_quant = [](const char* type, std::uint64_t block_bytes) {
    return [=](std::uint64_t rows, std::uint64_t cols) {
      return TensorRow{type, shape_of({rows, cols}), rows * cols, rows * cols / 256 * block_bytes};
    };
  };
  const auto q4_k = k_quant("q4_k", 144), q6_k = k_quant("q6_k", 210);

  const CliRun r = run("info -m " + kModels + "llama3/model.q4_k_m.gguf --tensors");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> order;
  const auto rows = tensor_rows(r.output, order);
  EXPECT_EQ(rows.size(), 4 + 9 * layers) << r.output;  // embedding, output norm, output, rope_freqs; 9 a layer
  EXPECT_EQ(rows.at("token_embd.weight"), q4_k(vocab, hidden));
  EXPECT_EQ(rows.at("output.weight"), q6_k(vocab, hidden));
  EXPECT_EQ(rows.at("blk.0.attn_k.weight"), q4_k(kv, hidden));
  EXPECT_EQ(rows.at("blk.0.ffn_down.weight"), q4_k(hidden, ffn));
  EXPECT_EQ(rows.at("blk.1.ffn_down.weight"), q6_k(hidden, ffn));  // llama.cpp's use_more_bits layer
  EXPECT_EQ(rows.at("blk.1.ffn_norm.weight"), (TensorRow{"f32", shape_of({hidden}), hidden, 4 * hidden}));
  EXPECT_EQ(rows.at("rope_freqs.weight"), (TensorRow{"f32", shape_of({head_dim / 2}), head_dim / 2, 2 * head_dim}));
  EXPECT_NE(r.output.find(totals(rows)), std::string::npos) << r.output;
}

// Without -m, info describes the demo model, as generate runs it.
TEST(Cli, InfoWithoutAModelDescribesTheDemoModel) {
  const CliRun r = run("info --tensors");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("models/kjv-llama"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.embed_tokens.weight"), std::string::npos) << r.output;
}

TEST(Cli, BadModelPathsFailCleanly) {
  expect_clean_failure("generate -m /no/such/model -p hi", "/no/such/model");
  const fs::path garbage = scratch_file("garbage.gguf");
  std::ofstream(garbage) << "this is not a gguf file at all";
  expect_clean_failure("generate -m " + garbage.string() + " -p hi", garbage.string());
  expect_clean_failure("info -m " + garbage.string(), garbage.string());
}

TEST(Cli, TruncatedGgufFailsCleanlyAtEveryCut) {
  const fs::path original = kModels + "qwen2/model.gguf";
  std::ifstream in(original, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 1000u);
  const fs::path cut = scratch_file("truncated.gguf");
  for (std::size_t size : {std::size_t{3}, std::size_t{20}, bytes.size() / 3, bytes.size() - 1}) {
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, size);
    expect_clean_failure("generate -m " + cut.string() + " -p hi -n 1", cut.string());
  }
}

TEST(Cli, BrokenHuggingFaceFolderFailsCleanly) {
  const fs::path folder = scratch_file("broken_hf");
  fs::remove_all(folder);
  fs::copy(kModels + "qwen2", folder);
  std::ofstream(folder / "config.json") << "{ not json";
  expect_clean_failure("generate -m " + folder.string() + " -p hi", "config.json");
  fs::copy_file(kModels + "qwen2/config.json", folder / "config.json", fs::copy_options::overwrite_existing);
  fs::resize_file(folder / "model.safetensors", 1000);
  expect_clean_failure("generate -m " + folder.string() + " -p hi", "model.safetensors");
}

// A number no double holds (nlohmann's out_of_range) in any of a folder's JSON files used to abort
// info, generate and serve with "terminate called" (issue #29). info reads no tokenizer.
TEST(Cli, NumberBeyondADoubleInAnyJsonFileFailsCleanly) {
  const fs::path folder = scratch_file("huge_number_hf");
  for (const char* file : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
    fs::remove_all(folder);
    fs::copy(kModels + "qwen2", folder);
    std::ofstream(folder / file) << R"({"max_position_embeddings": 1e400})";
    const std::string needle = (folder / file).string() + ": the file is not valid JSON";
    if (!std::string_view(file).starts_with("tokenizer")) expect_clean_failure("info -m " + folder.string(), needle);
    expect_clean_failure("generate -m " + folder.string() + " -p hi -n 1", needle);
  }
}

TEST(Cli, BadArgumentsFailCleanly) {
  expect_clean_failure("generate -m " + kModels + "qwen2 -p hi --temp -1", "temperature");
  expect_clean_failure("generate -m " + kModels + "qwen2 -p hi --device cuda", "CUDA");
  expect_clean_failure("perplexity -m " + kModels + "qwen2 -f /no/such/text", "/no/such/text");
  const CliRun bad_line = run("tokenize --jsonl -m " + kModels + "qwen2", "\"fine\"\n{not json\n");
  EXPECT_EQ(bad_line.exit_code, 1) << bad_line.output;
  EXPECT_NE(bad_line.output.find("line 2"), std::string::npos) << bad_line.output;
}

TEST(Cli, UnknownCommandsAndMissingOptionsAreUsageErrors) {
  const CliRun unknown = run("fly");
  EXPECT_NE(unknown.exit_code, 0);
  const CliRun missing = run("perplexity -m " + kModels + "qwen2");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("--file"), std::string::npos) << missing.output;
}

TEST(Cli, GenerateWithoutAModelUsesTheDemoModel) {
  const CliRun r = run("generate -p 'In the beginning' -n 8 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("generation: 8 tokens"), std::string::npos) << r.output;
}

// tokenize and bench take the demo model too when given none.
TEST(Cli, TokenizeAndBenchWithoutAModelUseTheDemoModel) {
  const CliRun tokens = run("tokenize", "In the beginning");
  ASSERT_EQ(tokens.exit_code, 0) << tokens.output;
  const CliRun demo = run("tokenize -m " + std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama", "In the beginning");
  EXPECT_EQ(tokens.output, demo.output);
  const CliRun bench = run("bench --device cpu -p 8 -n 2 -r 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("kjv-llama"), std::string::npos) << bench.output;
}

// The generated text of a run's output: what comes before the timings (stderr, which the output
// interleaves with stdout).
std::string generated_text(const std::string& output) { return output.substr(0, output.find("prompt: ")); }

TEST(Cli, GenerateReadsThePromptFromStandardInputOrAFile) {
  const CliRun given = run("generate -p 'In the beginning' -n 8 --temp 0");
  ASSERT_EQ(given.exit_code, 0) << given.output;
  const CliRun piped = run("generate -p - -n 8 --temp 0", "In the beginning");
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(generated_text(piped.output), generated_text(given.output));
  const fs::path file = scratch_file("prompt.txt");
  std::ofstream(file) << "In the beginning";
  const CliRun from_file = run("generate -f " + file.string() + " -n 8 --temp 0");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  EXPECT_EQ(generated_text(from_file.output), generated_text(given.output));
  expect_clean_failure("generate -n 8", "-p TEXT");
  expect_clean_failure("generate -p hi -f " + file.string(), "-p TEXT");
  expect_clean_failure("generate -f /no/such/prompt", "/no/such/prompt");
}

// chat: each line is a turn answered through the chat template; /clear forgets what came before,
// so the same question greedily gets the same answer again; a conversation longer than the
// context loses its oldest turns; a message that cannot fit is refused and the chat goes on.
TEST(Cli, ChatHoldsAConversationWithinTheContext) {
  const CliRun cleared = run("chat -n 12 --temp 0", "Who was Moses?\n/clear\nWho was Moses?\n/exit\nnever read\n");
  ASSERT_EQ(cleared.exit_code, 0) << cleared.output;
  const std::string marker = "(conversation cleared)\n";
  const auto at = cleared.output.find(marker);
  ASSERT_NE(at, std::string::npos) << cleared.output;
  const std::string first = cleared.output.substr(0, at), second = cleared.output.substr(at + marker.size());
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);

  std::string long_talk;
  for (int turn = 0; turn < 8; ++turn) long_talk += "Tell me again of the words of the prophets, of Moses and of Aaron.\n";
  const CliRun talk = run("chat -n 64 --temp 0", long_talk + std::string(3000, 'x') + "\nAnd then?\n");
  ASSERT_EQ(talk.exit_code, 0) << talk.output;
  EXPECT_NE(talk.output.find("(the oldest turn was dropped"), std::string::npos) << talk.output;
  EXPECT_NE(talk.output.find("leaving no room to answer"), std::string::npos) << talk.output;
}

// --json-schema and --grammar constrain the text, which the demo model would never write as JSON:
// it parses (nlohmann's parser) and has the schema's shape; a complete grammar stops the generation.
TEST(Cli, GenerateTakesAGrammarOrAJsonSchema) {
  const std::string schema = R"({"type": "object", "required": ["who", "verse"], "additionalProperties": false,
    "properties": {"who": {"enum": ["Moses", "Aaron"]}, "verse": {"type": "integer"}}})";
  const fs::path schema_file = scratch_file("schema.json");
  std::ofstream(schema_file) << schema;
  const CliRun json_run = run("generate -p 'And God said' --temp 0 -n 200 --json-schema-file " + schema_file.string());
  ASSERT_EQ(json_run.exit_code, 0) << json_run.output;
  const auto value = nlohmann::json::parse(generated_text(json_run.output), nullptr, false);
  ASSERT_TRUE(value.is_object()) << json_run.output;
  EXPECT_TRUE(value["who"] == "Moses" || value["who"] == "Aaron") << json_run.output;
  EXPECT_TRUE(value["verse"].is_number_integer()) << json_run.output;
  const CliRun inline_schema = run("generate -p 'And God said' --temp 0 -n 200 -j '" + schema + "'");
  EXPECT_EQ(generated_text(inline_schema.output), generated_text(json_run.output));

  const CliRun answer = run("generate -p 'And God said' --seed 4 -n 50 --grammar 'root ::= (\"yea\" | \"nay\") \", \" [0-9]{2}'");
  ASSERT_EQ(answer.exit_code, 0) << answer.output;
  EXPECT_TRUE(std::regex_search(answer.output, std::regex("^(yea|nay), [0-9]{2}\n?prompt: "))) << answer.output;
  EXPECT_NE(answer.output.find("stopped by end of text"), std::string::npos) << answer.output;

  expect_clean_failure("generate -p hi --grammar 'root ::= item'", "'item' is used but never defined");
  expect_clean_failure("generate -p hi --json-schema '{\"type\": \"array\", \"uniqueItems\": true}'", "'uniqueItems'");
  expect_clean_failure("generate -p hi --json-schema '{bad'", "not valid JSON");
  expect_clean_failure("generate -p hi --grammar-file /no/such/grammar", "/no/such/grammar");
  const CliRun both = run("generate -p hi --grammar 'root ::= \"a\"' -j '{}'");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
}

// Values out of sense: a negative top-k is refused; threads past the machine's and a context past the
// model's training run, with a warning.
TEST(Cli, ValuesOutOfSenseAreRefusedOrWarnedAbout) {
  for (const char* command : {"generate -p hi", "chat"}) {
    const CliRun top_k = run(std::string(command) + " --top-k -5");
    EXPECT_NE(top_k.exit_code, 0) << command;
    EXPECT_NE(top_k.output.find("--top-k"), std::string::npos) << top_k.output;
  }
  for (const auto& [command, needle] : {std::pair{"generate -p hi --gpu-memory 2", "--gpu-memory: '2': give a share"},
                                        std::pair{"serve --gpu-memory 20XB", "--gpu-memory: '20XB': unknown unit 'XB'"}}) {
    const CliRun bound = run(command);
    EXPECT_NE(bound.exit_code, 0) << command;
    EXPECT_NE(bound.output.find(needle), std::string::npos) << bound.output;
  }
  // A bound on GPU memory bounds nothing on the CPU, which is said.
  const CliRun cpu_bound = run("generate -p hi -n 1 --device cpu --gpu-memory 0.5");
  ASSERT_EQ(cpu_bound.exit_code, 0) << cpu_bound.output;
  EXPECT_NE(cpu_bound.output.find("--gpu-memory bounds GPU memory; this runs on the CPU"), std::string::npos)
      << cpu_bound.output;
  const CliRun threads = run("generate -p hi -n 1 --threads 999");
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  EXPECT_NE(threads.output.find("warning: --threads 999"), std::string::npos) << threads.output;
  // qwen2's fixture was trained for 512 positions.
  const CliRun context = run("generate -m " + kModels + "qwen2 -p hi -n 1 --ctx-size 1024");
  ASSERT_EQ(context.exit_code, 0) << context.output;
  EXPECT_NE(context.output.find("warning: a context of 1024 tokens"), std::string::npos) << context.output;
}

}  // namespace

namespace {

TEST(Cli, BenchPrintsOneJsonRowPerSetting) {
  // On the CPU: in a GPU build on a machine without a device, --device auto's notice would join the output.
  const CliRun r = run("bench --device cpu -m " + kModels + "qwen2 -p 16,32 -n 8 -b 1,3 -r 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output);
  ASSERT_EQ(rows.size(), 4u);  // pp16, pp32, tg8 x batch 1, tg8 x batch 3
  EXPECT_EQ(rows[0]["test"], "pp16");
  EXPECT_EQ(rows[3]["test"], "tg8");
  EXPECT_EQ(rows[3]["batch"], 3);
  for (const auto& row : rows) {
    EXPECT_EQ(row["tokens_per_second"].size(), 2u);
    EXPECT_GT(row["median"].get<double>(), 0);
    EXPECT_GT(row["bound"].get<double>(), 0);
  }
}

TEST(Cli, BenchRejectsBadSettings) {
  expect_clean_failure("bench --synthetic llama9-1t", "llama9-1t");
  expect_clean_failure("bench --synthetic llama3-1b --dtype iq2_xxs", "iq2_xxs");
  expect_clean_failure("bench -m " + kModels + "qwen2 --synthetic llama3-1b", "exactly one");
}

}  // namespace
