// `tessera chat-template`: renders a chat template (a Jinja file or the model's tokenizer.chat_template) with the
// variables of a JSON file and prints the prompt byte for byte, as transformers' apply_chat_template would.
#include <cstdio>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "jinja/template.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tessera {
namespace {

struct ChatTemplateArgs {
  std::string template_file;
  std::string model;
  std::string context_file;
  std::string now;
};

std::string read_file_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{} {}: cannot read", what, path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int run_chat_template(const ChatTemplateArgs& a) {
  nlohmann::ordered_json context;
  try {
    context = nlohmann::ordered_json::parse(read_file_text(a.context_file, "--context"));
  } catch (const nlohmann::json::exception& e) {
    fail("--context {}: not JSON: {}", a.context_file, e.what());
  }
  if (!context.is_object()) fail("--context {}: must hold a JSON object of template variables", a.context_file);

  ChatFormat format;
  if (!a.template_file.empty()) {
    // bos_token/eos_token come from the context only: a bare template file has no vocabulary.
    format = ChatFormat::jinja(read_file_text(a.template_file, "--template"), "", "", a.template_file);
  } else {
    const auto file = gguf::GgufFile::open(a.model);
    const auto jinja = file.metadata().opt_string("tokenizer.chat_template");
    if (!jinja) fail("{}: the model has no tokenizer.chat_template", a.model);
    const auto tok = Tokenizer::from_metadata(file.metadata());
    format = ChatFormat::jinja(*jinja, tok->bos() >= 0 ? tok->token_text(tok->bos()) : "",
                               tok->eos() >= 0 ? tok->token_text(tok->eos()) : "", a.model);
  }
  jinja::RenderOptions options;
  if (!a.now.empty()) options.now = jinja::parse_iso8601(a.now);
  const std::string out = format.render(context, options);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_chat_template_command(CLI::App& root) {
  auto a = std::make_shared<ChatTemplateArgs>();
  CLI::App* app = root.add_subcommand(
      "chat-template", "Render a chat template with the variables of a JSON file and print the prompt exactly");
  auto* t = app->add_option("--template", a->template_file, "A Jinja chat template file");
  auto* m = app->add_option("-m,--model", a->model, "A GGUF model: render its tokenizer.chat_template");
  t->excludes(m);
  app->add_option("--context", a->context_file,
                  "JSON object of template variables: messages, add_generation_prompt, bos_token, eos_token, tools, "
                  "enable_thinking, reasoning_effort, ...")
      ->required();
  app->add_option("--now", a->now, "The date and time strftime_now reads (ISO-8601, default: now)");
  return {app, [a] {
            if (a->template_file.empty() && a->model.empty()) fail("chat-template needs --template FILE or -m MODEL");
            return run_chat_template(*a);
          }};
}

}  // namespace tessera
