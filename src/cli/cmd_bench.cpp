// `tessera bench -m MODEL [-p 512] [-n 128] [--np 1,4] [-t N,...] [--workers ...] [--check-plan]`: llama-bench's tests
// on one node or a pipeline over workers, with the roofline, wire bytes and the planner's predictions checked.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/bench_output.h"
#include "cli/bench_parallel.h"
#include "cli/bench_shard_alone.h"
#include "cli/cluster_options.h"
#include "cli/commands.h"
#include "cli/grammar_options.h"
#include "cli/model_options.h"
#include "cli/place_spec.h"
#include "cli/plan_choice.h"
#include "cli/table.h"
#include "cluster/pipeline_executor.h"
#include "cluster/remote_stage_endpoint.h"
#include "engine/benchmark.h"
#include "engine/grammar_vocab.h"
#include "engine/local_executor.h"
#include "grammar/constraint.h"
#include "grammar/parser.h"
#include "hw/probe.h"
#include "plan/plan_cli.h"
#include "plan/split_spec.h"
#include "tensor/kernels.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct BenchArgs {
  ModelOptions model;
  std::vector<std::string> prompts = {"512"};
  std::vector<std::string> gens = {"128"};
  std::vector<std::string> concurrency = {"1"};
  std::vector<std::string> depths = {"0"};
  std::vector<std::string> threads;
  ClusterOptions cluster;
  bool check_plan = false;
  bool no_plan = false;
  int repetitions = 5;
  std::string output = "md";
  bool no_probe = false;
  bool no_warmup = false;
  double probe_seconds = 1.0;
  uint64_t probe_buffer_mib = 0;
  GrammarOptions grammar;
};

std::vector<int64_t> parse_lists(const std::vector<std::string>& texts, std::string_view flag, int64_t min_value) {
  std::vector<int64_t> out;
  for (const auto& text : texts) {
    const auto values = parse_int_list(text, flag, min_value);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

// Bytes on every link of a pipeline, both ways; nullopt for an executor without links (a local run).
std::optional<uint64_t> wire_bytes(const Executor& e) {
  const auto* p = dynamic_cast<const cluster::PipelineExecutor*>(&e);
  if (p == nullptr) return std::nullopt;
  std::optional<uint64_t> total;
  for (size_t i = 0; i < p->n_stages(); ++i) {
    if (const auto* r = dynamic_cast<const cluster::RemoteStageEndpoint*>(&p->stage(i))) {
      const net::LinkStats st = r->link_stats();
      total = total.value_or(0) + st.bytes_sent + st.bytes_received;
    }
  }
  return total;
}

// "0-10@local,11-21@b": the stages as built.
// The bytes a rank under --tp/--ep sent into collectives; nullopt for an executor without a communicator.
std::optional<uint64_t> collective_bytes(const Executor& e) {
  const auto* local = dynamic_cast<const LocalExecutor*>(&e);
  if (local == nullptr || local->communicator() == nullptr) return std::nullopt;
  return local->communicator()->stats().bytes;
}

std::string pipeline_split(const Executor& e) {
  const auto* p = dynamic_cast<const cluster::PipelineExecutor*>(&e);
  if (p == nullptr) return "";
  std::vector<plan::LayerRange> ranges;
  for (size_t i = 0; i < p->n_stages(); ++i) {
    const LayerRange l = p->stage(i).layers();
    ranges.push_back({p->stage(i).node(), l.begin, l.end - 1});
  }
  return plan::format_ranges(ranges);
}

std::unique_ptr<BenchPrinter> make_printer(const BenchArgs& a, const BenchConfig& config, const BenchModel& model) {
  size_t test_width = 0;
  for (const BenchTest& t : bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth)) {
    test_width = std::max(test_width, t.name().size());
  }
  return make_bench_printer(a.output, cpu_model_name(), model, config.probe, a.cluster.enabled(), a.cluster.split,
                            test_width);
}

// The planner's request for a bench test: one prompt of n_prompt tokens, or n_gen steps of n_seq sequences after a
// one-token context.
plan::CliPlanRequest plan_request(const BenchArgs& a, const ModelOptions& mo, const BenchTest& t, int threads,
                                  bool with_workers) {
  plan::CliPlanRequest r;
  r.model_path = mo.model;
  if (with_workers) {
    r.workers = a.cluster.workers;
    r.split = a.cluster.split;
    r.place = a.cluster.place;
    r.plan_cluster = a.cluster.plan_cluster;
    if (!r.place.empty()) r.place_stages = place_for_plan(r.place, worker_names(r.workers), mo.ep_redundancy);
    r.key_file = a.cluster.key_file;
    r.wire_type = a.cluster.wire_type;
    r.micro_batch = a.cluster.micro_batch;
  }
  r.threads = threads;
  r.prompt_tokens = std::max<int64_t>(t.n_prompt, 1);
  r.n_gen = std::max<int64_t>(t.n_gen, 1);
  r.concurrency = t.n_seq;
  r.n_ctx = mo.n_ctx;
  r.n_batch = mo.n_batch;
  r.kv_type = mo.kv_type;
  r.repack = mo.repack;
  r.probe_seconds = a.probe_seconds;
  r.parallel = mo.parallel;  // under --tp/--ep: the plan is over the ranks
  return r;
}

// How a measured run and a plan row are named in the check: "local", or "pipeline" and its split.
std::string check_label(const plan::Strategy& s) {
  if (s.kind == plan::StrategyKind::Local) return "local";
  if (s.kind == plan::StrategyKind::Pipeline || s.kind == plan::StrategyKind::UserSplit ||
      s.kind == plan::StrategyKind::Single) {
    return fmt::format("pipeline {}", plan::format_ranges(s.stages));
  }
  if (s.kind == plan::StrategyKind::Replicas) return fmt::format("replicas {}", fmt::join(s.nodes, ","));
  if (s.kind == plan::StrategyKind::TensorPipeline) return s.name;
  if (s.is_parallel()) {
    return fmt::format("{} x{}", plan::parallel_mode_name(s.parallel.front().mode), s.parallel.front().nodes.size());
  }
  return s.name;
}

// The planner's tokens/s for a test on a row: prefill for a prompt, decode of one sequence or of several.
double predicted_ts(const plan::Strategy& s, const BenchTest& t) {
  return t.n_prompt > 0 ? s.pred.prefill_tps : t.n_seq > 1 ? s.pred.decode_tps_c : s.pred.decode_tps_1;
}

// Whether the planner's own choice for a test is what ran fastest (within 5%: the machines are noisy).
std::string choice_verdict(const std::string& choice, const std::map<std::string, double>& measured) {
  const auto fastest = std::max_element(measured.begin(), measured.end(),
                                        [](const auto& x, const auto& y) { return x.second < y.second; });
  const auto it = measured.find(choice);
  if (it == measured.end()) return "not run";
  if (it == fastest) return "agrees: measured fastest";
  const double slower = 1.0 - it->second / fastest->second;
  if (slower <= 0.05) return fmt::format("agrees: within {:.0f}% of the fastest", 100.0 * slower);
  return fmt::format("disagrees: {} ran {:.0f}% faster", fastest->first, 100.0 * (fastest->second / it->second - 1));
}

// --check-plan: the planner's prediction for each measured result, side by side, with the ratio; then, per test,
// the planner's own choice against the strategy that measured fastest.
// Node and link profiles per (threads, distributed), probed once for every plan of a --check-plan run.
using ClusterCache = std::map<std::pair<int, bool>, plan::Cluster>;

plan::CliPlan cached_plan(const plan::CliPlanRequest& req, int threads, bool dist, ClusterCache& clusters) {
  const auto key = std::make_pair(threads, dist);
  const auto it = clusters.find(key);
  plan::CliPlan p = plan::make_cli_plan(req, it == clusters.end() ? nullptr : &it->second);
  if (it == clusters.end()) clusters.emplace(key, *p.cluster);
  return p;
}

void print_plan_check(const BenchArgs& a, const ModelOptions& mo, const std::vector<BenchResult>& results,
                      ClusterCache& clusters) {
  TextTable table({"strategy", "threads", "test", "predicted t/s", "measured t/s", "measured/predicted"});
  struct Choice {
    std::string test;
    int threads;
    std::string planned;                     // the planner's choice with every node available
    std::map<std::string, double> measured;  // t/s by strategy
  };
  std::vector<Choice> choices;
  std::vector<std::string> per_token;  // under --tp/--ep: each generation test's arithmetic
  for (size_t ri = 0; ri < results.size(); ++ri) {
    const BenchResult& r = results[ri];
    const bool dist = r.n_workers > 0;
    const bool copies = r.split.starts_with("replicas ");
    plan::CliPlanRequest req = plan_request(a, mo, r.timing.test, r.n_threads, dist);
    // The split that ran: the user's, the default one, or the planner's own choice.
    if (dist) req.split = copies ? std::string() : r.split;
    const plan::CliPlan p = cached_plan(req, r.n_threads, dist, clusters);
    const size_t n_rows = p.plan.strategies.size();
    size_t row = copies ? n_rows : p.user.value_or(n_rows);
    for (size_t i = 0; copies && i < n_rows; ++i) {
      if (check_label(p.plan.strategies[i]) == r.split) row = i;
    }
    if (row >= n_rows) fail("internal: the plan has no row for the strategy that ran ({})", r.split);
    const plan::Strategy& s = p.plan.strategies[row];
    const BenchTest& t = r.timing.test;
    const double pred = predicted_ts(s, t);
    const std::string name = !dist                      ? (mo.parallel ? check_label(s) : "local")
                             : copies                   ? r.split
                             : !a.cluster.place.empty() ? s.name
                                                        : fmt::format("pipeline {}", r.split);
    if (auto line = parallel_check_arithmetic(s, r)) {
      per_token.push_back(*line);
    }
    table.add_row({name, fmt::format("{}", r.n_threads), t.name(), s.feasible ? fmt::format("{:.2f}", pred) : "-",
                   fmt::format("{:.2f}", r.timing.avg_ts),
                   s.feasible && pred > 0 ? fmt::format("{:.2f}", r.timing.avg_ts / pred) : "-"});
    auto c = std::find_if(choices.begin(), choices.end(),
                          [&](const Choice& x) { return x.test == t.name() && x.threads == r.n_threads; });
    if (c == choices.end()) c = choices.insert(choices.end(), Choice{t.name(), r.n_threads, {}, {}});
    c->measured[name] = r.timing.avg_ts;
    if (dist && p.plan.best) c->planned = check_label(p.plan.strategies[*p.plan.best]);
  }
  std::string text = fmt::format("\nPlanner check (predicted against measured):\n{}", table.render(""));
  if (!per_token.empty()) {
    text +=
        "\nPer token, rank 0's own shard and its collectives (waits for the other ranks included; under --pp also its "
        "wait for the stage before) against the planner's slowest shard and collectives:\n";
    for (const auto& l : per_token) text += l + "\n";
  }
  TextTable verdicts({"test", "threads", "planner's choice", "measured fastest", "verdict"});
  for (const Choice& c : choices) {
    if (c.planned.empty() || c.measured.size() < 2) continue;
    const auto fastest = std::max_element(c.measured.begin(), c.measured.end(),
                                          [](const auto& x, const auto& y) { return x.second < y.second; });
    verdicts.add_row({c.test, fmt::format("{}", c.threads), c.planned,
                      fmt::format("{} ({:.2f} t/s)", fastest->first, fastest->second),
                      choice_verdict(c.planned, c.measured)});
  }
  if (verdicts.size() > 0) {
    text += fmt::format("\nThe planner's choice for each test against the fastest measured:\n{}", verdicts.render(""));
  }
  // Standard output stays machine-readable for csv and json.
  fmt::print(a.output == "md" ? stdout : stderr, "{}", text);
}

// The plan's workload: the longest prompt, generation and most sequences of the tests.
BenchTest largest_test(const BenchConfig& config) {
  const std::vector<BenchTest> tests = bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth);
  BenchTest t = tests.front();
  for (const auto& x : tests) {
    t.n_prompt = std::max(t.n_prompt, x.n_prompt);
    t.n_gen = std::max(t.n_gen, x.n_gen);
    t.n_seq = std::max(t.n_seq, x.n_seq);
  }
  return t;
}

int run_bench(BenchArgs& a) {
  BenchConfig config;
  config.n_prompt = parse_lists(a.prompts, "-p", 0);
  config.n_gen = parse_lists(a.gens, "-n", 0);
  config.concurrency = parse_lists(a.concurrency, "--concurrency", 1);
  config.n_depth = parse_lists(a.depths, "-d", 0);
  for (int64_t c : config.concurrency) {
    if (c > 4096) fail("--concurrency: {} sequences is more than 4096", c);
  }
  for (int64_t t : parse_lists(a.threads, "-t", 1)) {
    if (t > 1024) fail("-t: {} threads is more than 1024", t);
    config.threads.push_back(static_cast<int>(t));
  }
  if (config.threads.empty()) config.threads.push_back(available_cores());
  config.run.repetitions = a.repetitions;
  config.run.n_batch = a.model.n_batch;
  config.run.warmup = !a.no_warmup;
  config.type_k = a.model.kv_type;
  config.probe = !a.no_probe;
  config.probe_seconds = a.probe_seconds;
  config.probe_buffer_bytes = a.probe_buffer_mib << 20;
  if (bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth).empty()) {
    fail("nothing to run: every prompt (-p) and generation (-n) length is 0");
  }
  if (!a.model.shard_alone.empty()) {
    if (a.cluster.enabled() || a.check_plan || !a.grammar.grammar_text().empty()) {
      fail("--shard-alone times one rank in this process: without --workers, --check-plan or a grammar");
    }
    ShardAloneRun run;
    run.model = a.model;
    if (run.model.model.empty()) run.model.model = default_model_path();
    run.model.n_ctx = bench_context(config);
    run.config = config;
    run.rank = parse_shard_alone(a.model.shard_alone);
    run.output = a.output;
    run.probe_seconds = a.probe_seconds;
    run.plan_cluster = a.cluster.plan_cluster;
    return run_shard_alone(run);
  }
  // --workers without a layout: the planner's choice runs (plan_choice.h), planned for the largest test.
  const bool follow = !a.no_plan && !a.check_plan && config.threads.size() == 1 && plan_may_choose(a.model, a.cluster);
  if (follow) {
    ModelOptions planned = a.model;
    if (planned.model.empty()) planned.model = default_model_path();
    planned.n_ctx = bench_context(config);
    const auto request = plan_request(a, planned, largest_test(config), config.threads.front(), true);
    fmt::print(stderr, "{}", follow_plan(request, a.model, a.cluster));
  }
  const bool distributed = a.cluster.enabled();
  if (!distributed && !a.cluster.split.empty()) fail("--split needs --workers");

  ModelOptions mo = a.model;
  if (mo.model.empty()) mo.model = default_model_path();
  mo.n_ctx = bench_context(config);
  mo.threads = config.threads.front();
  const int64_t n_slots = bench_slots(config);
  const bool parallel = mo.parallel_ranks();
  if (parallel && (distributed || config.threads.size() > 1)) {
    fail("bench --tp/--ep measures one thread count on the ranks mpirun starts (no --workers, one -t)");
  }
  if (parallel) {
    // Each rank reads its own share of the weights: the head's bandwidth is no ceiling for the group.
    config.probe = false;
  }
  mo.profile_ranks = (!a.no_plan && !follow) || a.check_plan;
  const std::string grammar_text = a.grammar.grammar_text();
  LoadedModel first = load_model(mo, n_slots, !distributed || a.check_plan);
  if (first.follower_done) return 0;
  if (!grammar_text.empty()) {
    // One compiled grammar and one vocabulary trie for every sampler, as the server shares them.
    auto compiled = std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar_text));
    auto trie = make_token_trie(*first.tokenizer);
    config.run.constrain = [compiled, trie, grammar_text](Sampler& s) {
      s.set_grammar(grammar_text, std::make_shared<grammar::TokenConstraint>(compiled, trie));
    };
    log_info("bench: generation tests sample under the grammar ({} rules)", compiled->rules.size());
  }
  mo.parallel = first.parallel;
  const BenchModel model = describe_bench_model(mo.model, *first.weights);
  log_info("bench: {} ({}, {:.2f} MB read per decoded token), context {}, {} sequence slot(s)", mo.model, model.type,
           static_cast<double>(model.decode_bytes_per_token) / 1e6, mo.n_ctx, n_slots);
  if (!a.no_plan && !a.check_plan && !follow && (!parallel || mo.parallel)) {
    fmt::print(stderr, "{}",
               plan::plan_for_cli(plan_request(a, mo, largest_test(config), config.threads.front(), distributed)));
  }

  // Local runs: the first thread count reuses the executor loaded above; each other gets its own.
  const ExecutorFactory make_local = [&](int threads) -> std::unique_ptr<Executor> {
    if (first.executor && first.executor->threads() == threads) return std::move(first.executor);
    ModelOptions o = mo;
    o.threads = threads;
    return load_model(o, n_slots).executor;
  };
  // Distributed runs: a pipeline per thread count (the head's own stage, if any, uses them). run_benchmarks reads
  // config.split for each result after the executor is made, so the split as built is reported.
  BenchConfig dist_config = config;
  const ExecutorFactory make_pipeline = [&](int threads) -> std::unique_ptr<Executor> {
    ModelOptions o = mo;
    o.threads = threads;
    auto pipeline = build_pipeline(first, o, a.cluster, n_slots);
    dist_config.split = pipeline_split(*pipeline);
    return pipeline;
  };
  if (distributed) dist_config.n_workers = static_cast<int>(parse_workers(a.cluster.workers).size());
  // The head's bandwidth says nothing about a pipeline's ceiling (the workers read the weights): no roofline.
  dist_config.probe = false;

  std::unique_ptr<BenchPrinter> printer = make_printer(a, config, model);
  printer->header();
  std::fflush(stdout);
  ClusterCache clusters;
  const auto print = [&](const BenchResult& r) {
    if (!parallel || !a.check_plan || !mo.parallel) return printer->row(r);
    // Under mpirun the row that ran is the plan's own (--tp/--ep/--pp): its prediction goes beside the measured.
    const plan::CliPlan p =
        cached_plan(plan_request(a, mo, r.timing.test, r.n_threads, false), r.n_threads, false, clusters);
    BenchResult with = r;
    if (p.user && p.plan.strategies[*p.user].feasible) {
      with.predicted_ts = predicted_ts(p.plan.strategies[*p.user], r.timing.test);
    }
    printer->row(with);
  };
  std::vector<BenchResult> results;
  // Under --tp/--ep the bytes each rank sends into collectives per token stand where a pipeline's wire bytes do (and
  // run_bench_test records their calls, bytes and seconds per token).
  if (!distributed || a.check_plan) results = run_benchmarks(config, model, make_local, print, collective_bytes);
  if (parallel && first.comm) {
    const auto& st = first.comm->stats();
    log_info("collectives (rank 0, whole run): {} calls, {:.1f} MB sent, {:.3f} s spent in them", st.calls,
             static_cast<double>(st.bytes) / 1e6, st.seconds);
  }
  if (distributed) {
    auto d = run_benchmarks(dist_config, model, make_pipeline, print, wire_bytes);
    results.insert(results.end(), d.begin(), d.end());
  }
  // A replicas choice: every copy decodes its share of the sequences at the same time, on its own node; the total
  // tokens/s of a repeat is the sum over the copies (they start together and do the same amount of work each).
  const auto run_replicas = [&](const plan::Strategy& s, const BenchTest& t, int threads,
                                const std::string& head) -> BenchResult {
    std::vector<std::unique_ptr<Executor>> copies;
    for (const std::string& node : s.nodes) {
      ModelOptions o = mo;
      o.threads = threads;
      if (node == head) {
        copies.push_back(make_local(threads));
        continue;
      }
      ClusterOptions co = a.cluster;
      co.split = fmt::format("0-{}@{}", first.weights->config().n_layer - 1, node);
      copies.push_back(build_pipeline(first, o, co, n_slots));
    }
    const std::string label = fmt::format("replicas {}", fmt::join(s.nodes, ","));
    log_info("bench: {} with {} thread(s) over the planner's choice {} ({} sequences each)", t.name(), threads, label,
             fmt::join(s.sequences, "/"));
    std::vector<Executor*> ptrs;
    for (auto& c : copies) ptrs.push_back(c.get());
    BenchResult r;
    r.model = model;
    r.n_batch = config.run.n_batch;
    r.n_threads = threads;
    r.type_k = config.type_k;
    r.isa = std::string(isa_name(select_isa()));
    r.n_workers = dist_config.n_workers;
    r.split = label;
    r.timing = run_bench_copies(ptrs, s.nodes, s.sequences, t.n_gen, t.n_depth, config.run);
    return r;
  };
  if (distributed && a.check_plan) {
    // The planner's own choice for a test, when it is not what ran above, runs too: the check then says whether
    // the choice was the fastest.
    std::vector<std::string> ran = {"local", dist_config.split};
    for (const BenchTest& t : bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth)) {
      for (int threads : config.threads) {
        const plan::CliPlan p = cached_plan(plan_request(a, mo, t, threads, true), threads, true, clusters);
        if (!p.plan.best) continue;
        const plan::Strategy& s = p.plan.strategies[*p.plan.best];
        const bool staged = s.kind == plan::StrategyKind::Pipeline || s.kind == plan::StrategyKind::Single ||
                            s.kind == plan::StrategyKind::UserSplit;
        if (s.kind == plan::StrategyKind::Replicas && s.runnable && s.feasible && t.n_gen > 0) {
          BenchResult r = run_replicas(s, t, threads, p.cluster->head().name);
          print(r);
          results.push_back(std::move(r));
          continue;
        }
        if (!staged || !s.runnable || !s.feasible) continue;
        ClusterOptions co = a.cluster;
        co.split = plan::format_ranges(s.stages);
        BenchConfig one = dist_config;
        one.n_prompt = t.n_prompt > 0 ? std::vector<int64_t>{t.n_prompt} : std::vector<int64_t>{};
        one.n_gen = t.n_gen > 0 ? std::vector<int64_t>{t.n_gen} : std::vector<int64_t>{};
        one.concurrency = {t.n_seq};
        one.n_depth = {t.n_depth};
        one.threads = {threads};
        const ExecutorFactory make_choice = [&](int n_threads) -> std::unique_ptr<Executor> {
          ModelOptions o = mo;
          o.threads = n_threads;
          auto pipeline = build_pipeline(first, o, co, n_slots);
          one.split = pipeline_split(*pipeline);
          return pipeline;
        };
        if (std::find(ran.begin(), ran.end(), co.split) != ran.end()) continue;
        log_info("bench: {} with {} thread(s) over the planner's choice {}", t.name(), threads, co.split);
        auto d = run_benchmarks(one, model, make_choice, print, wire_bytes);
        results.insert(results.end(), d.begin(), d.end());
      }
    }
  }
  printer->footer();
  std::fflush(stdout);
  if (a.check_plan) print_plan_check(a, mo, results, clusters);
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand("bench", "Measure prompt processing and generation speed (like llama-bench)");
  add_model_options(*app, a->model, false);
  const std::string list_help = " (comma-separated list or range first-last[+step|*mult]; repeatable)";
  app->add_option("-p,--n-prompt", a->prompts, "Prompt lengths to test" + list_help)->capture_default_str();
  app->add_option("-n,--n-gen", a->gens, "Generation lengths to test" + list_help)->capture_default_str();
  app->add_option("-t,--threads", a->threads, "Thread counts to test (default: all cores)" + list_help);
  app->add_option("--concurrency,--np", a->concurrency,
                  "Sequences decoding together in generation tests, one batch of one token each per step; the "
                  "total tokens/s is reported as tgNxC" +
                      list_help)
      ->capture_default_str();
  app->add_option("-d,--n-depth", a->depths,
                  "Context depths: tokens already in each sequence's cache when a test starts, evaluated untimed "
                  "before every repeat, so a test measures at that context (tg128 @ d4096); the planner's "
                  "predictions (--check-plan) are for an empty cache" +
                      list_help)
      ->capture_default_str();
  add_cluster_options(*app, a->cluster);
  app->add_flag("--check-plan", a->check_plan,
                "Run locally and (with --workers) over the pipeline, then print the planner's predictions against "
                "the measured tokens/s");
  app->add_flag("--no-plan", a->no_plan, "Do not print the plan at start");
  app->add_option("-r,--repetitions", a->repetitions, "Timed runs per test")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app->add_option("-o,--output", a->output, "Output format")
      ->check(CLI::IsMember({"md", "csv", "json"}))
      ->capture_default_str();
  app->add_option("-b,--batch-size", a->model.n_batch, "Prompt tokens per forward pass")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  add_repack_option(*app, a->model.repack);
  add_parallel_options(*app, a->model);
  add_mmap_option(*app, a->model.mmap);
  add_pin_option(*app, a->model.pin);
  app->add_option("--kv-type,--cache-type-k", a->model.kv_type, "KV cache type: f16 or f32")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  add_grammar_options(*app, a->grammar);
  app->add_flag("--no-probe", a->no_probe, "Skip the bandwidth measurement and the roofline columns");
  app->add_flag("--no-warmup", a->no_warmup, "Skip the untimed warm-up run of each test");
  app->add_option("--probe-seconds", a->probe_seconds, "Bandwidth measurement time per thread count")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app->add_option("--probe-buffer-mib", a->probe_buffer_mib,
                  "Bandwidth test buffer in MiB (default: 1024 or 4x the last-level cache, whichever is larger)")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 20));
  return {app, [a] {
            use_workers_as_ranks(a->model, a->cluster);  // --workers with --tp/--ep: a group, not a pipeline
            return run_bench(*a);
          }};
}

}  // namespace tessera
