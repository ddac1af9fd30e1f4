// Renders every (chat template, conversation) pair of tests/fixtures/chat with @huggingface/jinja,
// as transformers.js's apply_chat_template does, and writes the results to
// tests/fixtures/chat/reference.jsonl for tests/chat/reference_test.cpp to match byte for byte.
//
//   cd tools/chat && npm ci && npm run reference
//
// Each line: {"template", "conversation", "extra", "add_generation_prompt", "bos_token",
// "eos_token"} and either "expected" (the prompt) or "error" (the message the template raised).
import { Template } from "@huggingface/jinja";
import { readFileSync, writeFileSync } from "node:fs";

const root = new URL("../../", import.meta.url);
const read = (path) => readFileSync(new URL(path, root), "utf8");
const conversations = JSON.parse(read("tests/fixtures/chat/conversations.json"));

const generic = [
  "user_only", "system_user", "multi_turn", "system_multi_turn", "assistant_last", "system_only",
  "empty_content", "unicode", "json_escaping", "bad_role_order", "assistant_first",
];
const toolCalls = ["tool_round", "tool_string_arguments", "tool_escaping", "parallel_tool_calls", "tools_no_messages_of_tools"];

// A template is a .jinja file (with the special tokens of its tokenizer) or a checkpoint's
// tokenizer_config.json. Cases name a conversation, or [conversation, extra template variables].
const templates = [
  { path: "tests/fixtures/chat/llama3.jinja", bos: "<|begin_of_text|>", eos: "<|eot_id|>", cases: generic },
  {
    path: "tests/fixtures/chat/llama3_1.jinja", bos: "<|begin_of_text|>", eos: "<|eot_id|>",
    cases: [...generic, ...toolCalls, ["system_user", { date_string: "02 Jan 2025" }], ["tool_round", { tools_in_user_message: false }]],
  },
  {
    path: "tests/fixtures/chat/qwen3.jinja", bos: null, eos: "<|im_end|>",
    cases: [...generic, ...toolCalls, "thinking_history", "thinking_reasoning_field",
      ["thinking_history", { enable_thinking: false }], ["user_only", { enable_thinking: true }]],
  },
  { path: "tests/fixtures/chat/mistral.jinja", bos: "<s>", eos: "</s>", cases: generic },
  { path: "tests/fixtures/chat/mistral_nemo.jinja", bos: "<s>", eos: "</s>", cases: [...generic, ...toolCalls] },
  { path: "tests/fixtures/chat/gemma.jinja", bos: "<bos>", eos: "<eos>", cases: [...generic, "content_parts"] },
  { path: "tests/fixtures/chat/google-gemma-2-2b-it.jinja", bos: "<bos>", eos: "<eos>", cases: generic },
  { path: "tests/fixtures/chat/google-gemma-3-it.jinja", bos: "<bos>", eos: "<eos>", cases: [...generic, "content_parts"] },
  { path: "tests/fixtures/chat/microsoft-Phi-3.5-mini-instruct.jinja", bos: "<s>", eos: "<|endoftext|>", cases: generic },
  ...["tests/fixtures/models/llama3", "tests/fixtures/models/mistral", "tests/fixtures/models/qwen2",
    "tests/fixtures/models/qwen3", "models/kjv-llama"].map((folder) => ({ path: `${folder}/tokenizer_config.json`, cases: generic })),
];

function load(template) {
  if (!template.path.endsWith(".json")) return { source: read(template.path), bos: template.bos, eos: template.eos };
  const config = JSON.parse(read(template.path));
  return { source: config.chat_template, bos: config.bos_token ?? null, eos: config.eos_token ?? null };
}

const lines = [];
for (const template of templates) {
  const { source, bos, eos } = load(template);
  const compiled = new Template(source);
  for (const entry of template.cases) {
    const [name, variables] = Array.isArray(entry) ? entry : [entry, {}];
    const conversation = conversations[name];
    if (!conversation) throw new Error(`unknown conversation ${name}`);
    const extra = { ...(conversation.tools ? { tools: conversation.tools } : {}), ...variables };
    for (const add_generation_prompt of [false, true]) {
      // What transformers.js passes: special tokens only when the tokenizer has them.
      const context = {
        messages: conversation.messages, add_generation_prompt, tools: null, documents: null,
        ...(bos ? { bos_token: bos } : {}), ...(eos ? { eos_token: eos } : {}), ...extra,
      };
      const record = { template: template.path, conversation: name, extra: variables, add_generation_prompt, bos_token: bos, eos_token: eos };
      try {
        record.expected = compiled.render(context);
      } catch (error) {
        record.error = error.message;
      }
      lines.push(JSON.stringify(record));
    }
  }
}
writeFileSync(new URL("tests/fixtures/chat/reference.jsonl", root), lines.join("\n") + "\n");
console.log(`wrote ${lines.length} renderings`);
