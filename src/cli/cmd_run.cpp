// `tessera run`: one-shot generation (prompt, then the continuation, streamed to standard output) or an
// interactive `--chat`. Logs and timings go to standard error.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/cluster_options.h"
#include "cli/commands.h"
#include "cli/grammar_options.h"
#include "cli/model_options.h"
#include "cli/place_spec.h"
#include "cli/plan_choice.h"
#include "cluster/pipeline_executor.h"
#include "engine/generator.h"
#include "engine/grammar_vocab.h"
#include "plan/plan_cli.h"
#include "tokenizer/chat_format.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct RunArgs {
  ModelOptions model;
  ClusterOptions cluster;
  SamplerParams sampler;
  std::optional<std::string> prompt;
  std::string prompt_file;
  int32_t n_predict = -1;
  bool no_escape = false;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  bool chat = false;
  std::string chat_template;
  std::string system_prompt;
  std::string logits_out;
  bool no_plan = false;
  bool planned = false;  // the plan was printed and followed before loading (plan_choice.h)
  GrammarOptions grammar;
};

// The workload the plan predicts: this run's prompt and generation, over the nodes given.
plan::CliPlanRequest plan_request(const RunArgs& a, int64_t prompt_tokens) {
  plan::CliPlanRequest r;
  r.model_path = a.model.model.empty() ? default_model_path() : a.model.model;
  r.workers = a.cluster.workers;
  r.split = a.cluster.split;
  r.place = a.cluster.place;
  r.plan_cluster = a.cluster.plan_cluster;
  if (!r.place.empty()) r.place_stages = place_for_plan(r.place, worker_names(r.workers), a.model.ep_redundancy);
  r.key_file = a.cluster.key_file;
  r.wire_type = a.cluster.wire_type;
  r.threads = a.model.threads;
  r.prompt_tokens = std::max<int64_t>(1, prompt_tokens);
  r.n_gen = a.n_predict > 0 ? a.n_predict : 128;
  r.n_ctx = a.model.n_ctx;
  r.n_batch = a.model.n_batch;
  r.micro_batch = a.cluster.micro_batch;
  r.kv_type = a.model.kv_type;
  r.repack = a.model.repack;
  return r;
}

// With --workers (or under mpirun --tp/--ep): what the planner predicts for the nodes given (the ranks), the split
// (layout) that will run against its choice and against this machine alone (one line when planning is not possible;
// the run goes on as asked either way).
void print_plan(const RunArgs& a, int64_t prompt_tokens, const LoadedModel& m) {
  if ((!a.cluster.enabled() && !m.parallel) || a.no_plan || a.planned) return;
  plan::CliPlanRequest r = plan_request(a, prompt_tokens);
  r.parallel = m.parallel;
  std::fputs(plan::plan_for_cli(r).c_str(), stderr);
}

// --workers without a layout: the planner's choice runs (a group, its pipeline, or the even pipeline). `text`: the
// prompt (none for --chat: 128 tokens, as its plan assumes).
void follow_the_plan(RunArgs& a, const std::string* text) {
  if (a.no_plan || !plan_may_choose(a.model, a.cluster)) return;
  const int64_t tokens =
      text ? static_cast<int64_t>(load_tokenizer(a.model.model)->encode(*text, true, true).size()) : 128;
  std::fputs(follow_plan(plan_request(a, tokens), a.model, a.cluster).c_str(), stderr);
  a.planned = true;
  a.model.profile_ranks = false;  // planned already: the group's ranks need not probe again
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the prompt file", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void print_timings(double load_s, const GenerationResult& r) {
  const auto n_gen = static_cast<double>(r.tokens.size());
  log_info("");
  log_info("load time:        {:10.2f} ms", load_s * 1e3);
  log_info("prompt eval time: {:10.2f} ms / {:5} tokens ({:9.2f} tokens per second)", r.prompt_seconds * 1e3,
           r.n_prompt, r.prompt_seconds > 0 ? static_cast<double>(r.n_prompt) / r.prompt_seconds : 0.0);
  log_info("generation time:  {:10.2f} ms / {:5} tokens ({:9.2f} tokens per second)", r.gen_seconds * 1e3,
           r.tokens.size(), r.gen_seconds > 0 ? n_gen / r.gen_seconds : 0.0);
  log_info("stopped by:       {}", stop_reason_name(r.reason));
}

class LogitsWriter {
 public:
  explicit LogitsWriter(const std::string& path) : path_(path) {
    if (path.empty()) return;
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_) fail("{}: cannot open for writing", path);
  }
  void write(std::span<const float> row) {
    out_.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size_bytes()));
    if (!out_) fail("{}: write failed", path_);
    ++rows_;
  }
  int64_t rows() const { return rows_; }
  bool enabled() const { return out_.is_open(); }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t rows_ = 0;
};

int run_once(RunArgs& a) {
  std::string text = a.prompt_file.empty() ? a.prompt.value_or("") : read_text_file(a.prompt_file);
  if (!a.no_escape && a.prompt_file.empty()) text = process_escapes(text);
  follow_the_plan(a, &text);
  LoadedModel m = load_model(a.model, 1, !a.cluster.enabled());
  if (m.follower_done) return 0;
  print_plan(a, static_cast<int64_t>(m.tokenizer->encode(text, true, true).size()), m);
  std::unique_ptr<Executor> distributed;
  if (a.cluster.enabled()) distributed = build_pipeline(m, a.model, a.cluster, 1);
  Executor& executor = distributed ? *distributed : static_cast<Executor&>(*m.executor);
  Sampler sampler(a.sampler, m.tokenizer->n_vocab());
  constrain_sampler(sampler, a.grammar.grammar_text(), *m.tokenizer);
  auto prompt = m.tokenizer->encode(text, true, true);
  if (prompt.empty()) {
    if (m.tokenizer->bos() < 0) fail("the prompt is empty and the vocabulary has no BOS token to start from");
    prompt.push_back(m.tokenizer->bos());
  }
  log_info("model: {} ({} layers, {}, context {}), prompt {} tokens, seed {}", a.model.model, executor.config().n_layer,
           distributed ? "distributed" : fmt::format("{} threads", m.executor->threads()), executor.n_ctx(),
           prompt.size(), sampler.seed());

  if (static_cast<int64_t>(prompt.size()) > executor.n_ctx()) {
    fail("the prompt of {} tokens does not fit the context of {} tokens (raise -c)", prompt.size(), executor.n_ctx());
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  LogitsWriter logits(a.logits_out);
  GenerationParams gp;
  gp.n_predict = a.n_predict;
  gp.n_batch = a.model.n_batch;
  gp.stop = a.stop;
  gp.ignore_eos = a.ignore_eos;
  gp.all_logits = logits.enabled();
  GenerationCallbacks cb;
  cb.on_text = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  cb.on_logits = [&](std::span<const float> row) { logits.write(row); };
  Generator gen(executor, *m.tokenizer);
  const bool strip = text.empty() && m.tokenizer->vocab().add_space_prefix();
  const auto* pipeline = dynamic_cast<const cluster::PipelineExecutor*>(distributed.get());
  const uint64_t wire_before = pipeline ? pipeline->wire_bytes() : 0;
  const GenerationResult r = gen.generate(prompt, sampler, gp, cb, strip);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (pipeline) {
    log_info("wire: {} bytes to and from the workers for {} prompt and {} generated tokens",
             pipeline->wire_bytes() - wire_before, r.n_prompt, r.tokens.size());
  }
  if (logits.enabled()) {
    log_info("logits: {} rows of {} f32 written to {}", logits.rows(), m.tokenizer->n_vocab(), a.logits_out);
  }
  print_timings(m.load_seconds, r);
  return 0;
}

int run_chat(RunArgs& a) {
  follow_the_plan(a, nullptr);
  LoadedModel m = load_model(a.model, 1, !a.cluster.enabled());
  if (m.follower_done) return 0;
  print_plan(a, 128, m);
  std::unique_ptr<Executor> distributed;
  if (a.cluster.enabled()) distributed = build_pipeline(m, a.model, a.cluster, 1);
  Executor& executor = distributed ? *distributed : static_cast<Executor&>(*m.executor);
  const auto& md = m.weights->file().metadata();
  const auto jinja = md.opt_string("tokenizer.chat_template");
  const auto& tok = *m.tokenizer;
  const ChatFormat format = ChatFormat::resolve(
      a.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(a.chat_template),
      jinja ? std::optional<std::string_view>(*jinja) : std::nullopt, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
      tok.eos() >= 0 ? tok.token_text(tok.eos()) : "");
  Sampler sampler(a.sampler, tok.n_vocab());
  Generator gen(executor, tok);
  GenerationParams gp;
  gp.n_predict = a.n_predict;
  gp.n_batch = a.model.n_batch;
  gp.stop = a.stop;
  GenerationCallbacks cb;
  cb.on_text = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };

  std::vector<ChatMessage> messages;
  if (!a.system_prompt.empty()) messages.push_back({"system", a.system_prompt});
  std::vector<TokenId> cached;  // the tokens whose keys and values are in the cache, in order
  std::optional<std::string> pending = a.prompt;
  log_info("chat: template {}; type a message and press enter, end with Ctrl-D", format.description());
  for (;;) {
    std::string line;
    if (pending) {
      line = *pending;
      pending.reset();
    } else {
      std::fputs("\n> ", stderr);
      if (!std::getline(std::cin, line)) break;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line});
    const std::string rendered = format.prompt(messages, true);
    const auto tokens = tok.encode(rendered, true, true);
    size_t common = 0;
    while (common < cached.size() && common < tokens.size() && cached[common] == tokens[common]) ++common;
    if (common == tokens.size()) --common;  // at least one token must be evaluated to get logits
    try {
      executor.truncate_sequence(0, static_cast<int64_t>(common));
    } catch (const Error&) {
      // A sliding-window layer no longer holds the keys before the common prefix: evaluate the whole chat again.
      executor.clear_sequence(0);
      common = 0;
    }
    const std::span<const TokenId> fresh(tokens.data() + common, tokens.size() - common);
    const GenerationResult r = gen.generate(fresh, sampler, gp, cb);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    messages.push_back({"assistant", r.text});
    cached.assign(tokens.begin(), tokens.end());
    cached.insert(cached.end(), r.tokens.begin(), r.tokens.end());
    cached.resize(static_cast<size_t>(executor.sequence_length(0)));
    if (r.reason == StopReason::ContextFull) {
      log_warn("the context of {} tokens is full; start again with a larger -c", executor.n_ctx());
      break;
    }
  }
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* app = root.add_subcommand("run", "Generate text from a prompt, or chat (--chat)");
  add_model_options(*app, a->model);
  add_sampler_options(*app, a->sampler);
  add_cluster_options(*app, a->cluster);
  add_grammar_options(*app, a->grammar);
  app->add_flag("--no-plan", a->no_plan, "With --workers or --tp/--ep: do not print the plan at start");
  auto* p = app->add_option("-p,--prompt", a->prompt, "Prompt text (\"\" starts from BOS alone)");
  auto* f = app->add_option("-f,--file", a->prompt_file, "Read the prompt from a file");
  p->excludes(f);
  app->add_option("-n,--n-predict", a->n_predict, "Tokens to generate (-1: until end of text or a full context)")
      ->capture_default_str();
  app->add_flag("--no-escape", a->no_escape, "Do not process escapes (\\n, \\t, ...) in the prompt");
  app->add_flag("--ignore-eos", a->ignore_eos, "Keep generating after end-of-generation tokens");
  app->add_option("--stop,-r,--reverse-prompt", a->stop, "Stop when this text is generated (repeatable)");
  app->add_flag("--chat,--conversation", a->chat, "Interactive conversation using the model's chat template");
  app->add_option("--chat-template", a->chat_template,
                  "A Jinja chat template file, or the name of a built-in format (default: the model's template)");
  app->add_option("--system-prompt", a->system_prompt, "System message for --chat");
  app->add_option("--logits-out", a->logits_out,
                  "Write the logits of every evaluated position: f32 little-endian, n_vocab per row, rows in "
                  "evaluation order (prompt positions, then one per generated token that was evaluated)");
  return {app, [a] {
            a->sampler.validate();
            if (a->chat && !a->grammar.grammar_text().empty())
              fail("--json-schema and --grammar apply to one-shot runs, not --chat");
            a->model.profile_ranks = !a->no_plan;  // under --tp/--ep: each rank's profile for the plan
            use_workers_as_ranks(a->model, a->cluster);
            return a->chat ? run_chat(*a) : run_once(*a);
          }};
}

}  // namespace tessera
