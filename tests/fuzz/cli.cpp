// Fuzz target: the option parser (init/exec/cli.cpp's parse_cli): the command
// line and the TRAINIT_* (and tini's TINI_*) variables.
//
// The input is readable text, one item a line ("\n" and "\\" inside an item
// stand for a newline and a backslash): $NAME=VALUE is an entry of the
// environment, every other line a word of the command line after argv[0]
// ("trainit", or "plan" when the first word is "plan", as `trainit plan`
// calls it). The seeds are the golden cases' arguments and environments.
//
// Properties, besides no sanitizer finding: an error is one line, and so is
// every warning; a parse that succeeds has an origin for every option, a
// command unless it is an action, and its settings (what `trainit plan`
// shows) read back: each shown value, given as the option's TRAINIT_*
// variable, parses to the same settings.
#include "exec/cli.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace trainit {
namespace {

std::vector<const char*> pointers(const std::vector<std::string>& items) {
  std::vector<const char*> out;
  out.reserve(items.size() + 1);
  for (const std::string& item : items)
    out.push_back(item.c_str());
  out.push_back(nullptr);
  return out;
}

std::string describe(const std::vector<Setting>& settings) {
  std::string text;
  for (const Setting& s : settings)
    text += s.name + "=" + s.value.value_or("(none)") + " ";
  return text;
}

// What `trainit plan` shows of `options`, given back as the variables.
void check_settings_read_back(const Options& options) {
  const std::vector<Setting> shown = settings_of(options);
  std::vector<std::string> env;
  for (const OptionSpec& option : option_table()) {
    for (const Setting& s : shown) {
      if (s.name == option.name && s.value && !s.value->empty())
        env.push_back(variable_name(option) + "=" + *s.value);
    }
  }
  const std::vector<std::string> argv = {"plan", "--", "program"};
  const auto argv_ptrs = pointers(argv);
  const auto env_ptrs = pointers(env);
  auto again = parse_cli(static_cast<int>(argv.size()), argv_ptrs.data(), env_ptrs.data());
  FUZZ_CHECK(again.ok(), "the shown settings do not parse: " + (again.ok() ? "" : again.error().message) +
                             "\nsettings: " + describe(shown));
  const std::vector<Setting> reread = settings_of(*again);
  FUZZ_CHECK(reread.size() == shown.size(), describe(shown));
  for (size_t i = 0; i < shown.size(); ++i) {
    FUZZ_CHECK(reread[i].value == shown[i].value, shown[i].name + ": shown " + shown[i].value.value_or("(none)") +
                                                      ", read back as " + reread[i].value.value_or("(none)"));
  }
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  std::vector<std::string> argv = {"trainit"};
  std::vector<std::string> env;
  for (std::string& line : fuzz::unescaped_lines(fuzz::as_text(data, size))) {
    if (line.starts_with('$'))
      env.push_back(line.substr(1));
    else if (argv.size() == 1 && argv[0] == "trainit" && line == "plan")
      argv[0] = "plan";
    else
      argv.push_back(std::move(line));
  }
  const auto argv_ptrs = pointers(argv);
  const auto env_ptrs = pointers(env);
  auto options = parse_cli(static_cast<int>(argv.size()), argv_ptrs.data(), env_ptrs.data());
  if (!options.ok()) {
    FUZZ_CHECK(fuzz::one_line(options.error().message) && !options.error().message.empty(), options.error().message);
    return 0;
  }
  FUZZ_CHECK(options->origins.size() == option_table().size(), "an option without an origin");
  FUZZ_CHECK(options->action != Action::kRun || !options->command.empty(), "a run without a command");
  for (const std::string& warning : options->warnings)
    FUZZ_CHECK(fuzz::one_line(warning), warning);
  check_settings_read_back(*options);
  return 0;
}
