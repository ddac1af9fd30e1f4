// rocmforge chat: a conversation at the terminal through the model's chat template, as
// `llama-cli -cnv` and `ollama run` hold one. Replies stream as they come; the history stays
// within the context (the oldest turns go first) and the engine's prefix cache spares each turn
// recomputing the ones before it. On a terminal, lines are edited with libedit (the arrow keys
// recall earlier lines); /clear forgets the conversation, /exit or the end of the input leaves,
// Ctrl-C stops a reply.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <editline/readline.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "cli/sampling_flags.h"
#include "server/model_service.h"
#include "util/error.h"

namespace rf::cli {

namespace {

using nlohmann::json;

struct ChatFlags {
  RunnerFlags runner;
  std::string system;
  int max_tokens = -1;
  SamplingFlags sampling;
};

// Lines typed at a terminal (with editing and history) or read from a pipe.
class LineReader {
 public:
  LineReader() : terminal_(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {}

  std::optional<std::string> read() {
    if (!terminal_) {
      std::string line;
      if (!std::getline(std::cin, line)) return std::nullopt;
      return line;
    }
    char* typed = readline("> ");
    if (!typed) return std::nullopt;
    std::string line(typed);
    std::free(typed);
    if (!line.empty()) add_history(line.c_str());
    return line;
  }
  bool terminal() const { return terminal_; }

 private:
  bool terminal_;
};

std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted = true; }

// Ctrl-C stops the reply being written while this lives; outside a reply it ends the program.
class InterruptScope {
 public:
  InterruptScope() {
    interrupted = false;
    std::signal(SIGINT, on_interrupt);
  }
  ~InterruptScope() { std::signal(SIGINT, SIG_DFL); }
};

class Conversation {
 public:
  Conversation(server::ModelService& model, const ChatFlags& flags) : model_(model), flags_(flags) { clear(); }

  void clear() {
    messages_ = json::array();
    if (!flags_.system.empty()) messages_.push_back({{"role", "system"}, {"content", flags_.system}});
  }

  // Answers `text`, streaming the reply to standard output.
  void answer(const std::string& text) {
    messages_.push_back({{"role", "user"}, {"content", text}});
    const auto prompt = fitted_prompt();
    if (!prompt) {
      messages_.erase(messages_.end() - 1);
      return;
    }
    GenerationRequest request;
    request.prompt = *prompt;
    request.options.max_tokens = flags_.max_tokens;
    request.options.sampling = flags_.sampling.resolve(model_.defaults());
    messages_.push_back({{"role", "assistant"}, {"content", stream_reply(model_.submit(std::move(request)))}});
  }

 private:
  // The conversation's prompt, its oldest turns dropped until the reply has room; nullopt (with
  // a message) when even the last one alone does not fit, or the template refuses it.
  std::optional<std::vector<std::int32_t>> fitted_prompt() {
    const std::size_t context = model_.max_context();
    const std::size_t room = flags_.max_tokens > 0 ? std::min<std::size_t>(flags_.max_tokens, context / 2) : context / 4;
    for (;;) {
      std::vector<std::int32_t> tokens;
      try {
        tokens = model_.tokenizer().encode(model_.chat()->render(messages_, true, json::object()), false);
      } catch (const std::exception& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return std::nullopt;
      }
      if (tokens.size() + room <= context) return tokens;
      const auto first = messages_.begin() + (messages_[0]["role"] == "system" ? 1 : 0);
      auto next_user = std::find_if(first + 1, messages_.end(), [](const json& m) { return m["role"] == "user"; });
      if (next_user == messages_.end()) {
        fmt::print(stderr, "error: this message takes {} of the context's {} tokens, leaving no room to answer\n",
                   tokens.size(), context);
        return std::nullopt;
      }
      messages_.erase(first, next_user);
      fmt::print(stderr, "(the oldest turn was dropped to keep the conversation within the context)\n");
    }
  }

  std::string stream_reply(const std::shared_ptr<RequestChannel>& channel) {
    const InterruptScope scope;
    std::string reply;
    for (bool done = false; !done;) {
      for (auto& e : channel->take(std::chrono::milliseconds(50))) {
        if (e.kind == StreamEvent::Kind::Text) {
          fmt::print("{}", e.text);
          std::fflush(stdout);
          reply += e.text;
        }
        if (e.kind == StreamEvent::Kind::Failed) fmt::print(stderr, "\nerror: {}", e.text);
        done = done || e.kind != StreamEvent::Kind::Text;
      }
      if (interrupted && !done) {
        channel->cancel();
        fmt::print(stderr, " [stopped]");
        done = true;
      }
    }
    fmt::print("\n");
    std::fflush(stdout);  // before anything on stderr
    return reply;
  }

  server::ModelService& model_;
  const ChatFlags& flags_;
  json messages_;
};

void run(ChatFlags& f) {
  f.sampling.check();
  auto runner = f.runner.load();
  const std::string name = std::filesystem::path(runner->checkpoint().path()).filename().string();
  server::ModelService model(std::move(runner), name, SchedulerOptions{});
  if (!model.chat()) fail("the model '{}' has no chat template: use `rocmforge generate`", name);
  LineReader lines;
  if (lines.terminal()) fmt::print("Chatting with {}: /clear forgets the conversation, /exit leaves, Ctrl-C stops a reply.\n", name);
  Conversation conversation(model, f);
  while (const auto line = lines.read()) {
    const auto first = line->find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const std::string text = line->substr(first);
    if (text == "/exit" || text == "/quit") break;
    if (text == "/clear") {
      conversation.clear();
      fmt::print(stderr, "(conversation cleared)\n");
    } else if (text.starts_with('/')) {
      fmt::print(stderr, "commands: /clear forgets the conversation, /exit leaves\n");
    } else {
      conversation.answer(text);
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto flags = std::make_shared<ChatFlags>();
  auto* cmd = app.add_subcommand("chat", "Hold a conversation with the model through its chat template");
  flags->runner.add_to(*cmd);
  cmd->add_option("--system", flags->system, "The system message that opens the conversation");
  cmd->add_option("-n,--max-tokens", flags->max_tokens, "Tokens a reply may take at most (-1: until the context is full)")
      ->check(CLI::Range(-1, 1 << 30));
  flags->sampling.add_to(*cmd);
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
