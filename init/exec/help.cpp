// The texts trainit prints for -h, --version and -l: --help is made from the
// option table (cli.h), so that every option and its variable is in it.
#include <fmt/core.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "exec/cli.h"

namespace trainit {
namespace {

constexpr std::size_t kHelpColumn = 26;  // where the help of each option starts
constexpr std::size_t kHelpWidth = 80;   // no line of --help is longer

constexpr std::string_view kSynopsis =
    "Usage: trainit [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "       trainit plan [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "       trainit status [--json] [--status-file PATH]\n";

constexpr std::string_view kUsageHead =
    "Run PROGRAM as the child of a correct init (PID 1): signals forwarded,\n"
    "zombies reaped, the child's exit code returned. `trainit plan` prints what\n"
    "a start would do, as JSON (trainit plan --help); `trainit status` what a\n"
    "running job's status file says (trainit status --help).\n"
    "\n"
    "Options, each with its variable (env:):\n";

constexpr std::string_view kUsageTail =
    "\n"
    "Variables: every option but -h, --version and -l can be given as\n"
    "TRAINIT_<OPTION>, the long name in capitals with '-' as '_'. Flags take\n"
    "1, true, yes or on (0, false, no or off: not given); an empty variable is\n"
    "unset. The command line wins over a variable, TRAINIT_<OPTION> over tini's.\n"
    "Other TRAINIT_* names are warned about, but for these, documented:\n"
    "{}"
    "trainit's variables are not passed on to PROGRAM or the ranks{}.\n"
    "\n"
    "Exit status: the child's, or 128+N when it died of signal N; 64 bad usage;\n"
    "126 program not executable; 127 program not found; 70/71 internal errors.\n";

constexpr std::string_view kLicense =
    "MIT License\n"
    "\n"
    "Copyright (c) 2026 The trainit authors\n"
    "\n"
    "Permission is hereby granted, free of charge, to any person obtaining a copy\n"
    "of this software and associated documentation files (the \"Software\"), to deal\n"
    "in the Software without restriction, including without limitation the rights\n"
    "to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n"
    "copies of the Software, and to permit persons to whom the Software is\n"
    "furnished to do so, subject to the following conditions:\n"
    "\n"
    "The above copyright notice and this permission notice shall be included in all\n"
    "copies or substantial portions of the Software.\n"
    "\n"
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n"
    "IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n"
    "FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE\n"
    "AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER\n"
    "LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,\n"
    "OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE\n"
    "SOFTWARE.\n";

// What a variable of `option` holds, for --help: TRAINIT_GRACE=SECONDS.
std::string variable_example(const OptionSpec& option) {
  switch (option.kind) {
    case Kind::kFlag:
      return variable_name(option) + "=1";
    case Kind::kList:
      return fmt::format("{}={},...", variable_name(option), option.value_name);
    default:
      return fmt::format("{}={}", variable_name(option), option.value_name);
  }
}

// A level's short flag takes no value (`-v 3` runs the program 3): it has a
// line of its own, apart from the long option that takes the level.
std::string counting_flag_usage(const OptionSpec& option) {
  const std::string head = fmt::format("  -{}", option.short_name);
  return fmt::format("{}{}one level more, repeatable (-{}{}); takes no value\n", head,
                     std::string(kHelpColumn - head.size(), ' '), option.short_name, option.short_name);
}

}  // namespace

std::string option_usage(const OptionSpec& option) {
  const std::string indent(kHelpColumn, ' ');
  const bool counts = option.kind == Kind::kLevel && option.short_name != 0;
  std::string head = option.short_name != 0 && !counts ? fmt::format("  -{}, --{}", option.short_name, option.name)
                                                       : fmt::format("  --{}", option.name);
  if (!option.value_name.empty()) {
    head += fmt::format(" {}", option.value_name);
  }
  std::string text = counts ? counting_flag_usage(option) + head : head;
  text += head.size() + 2 <= kHelpColumn ? std::string(kHelpColumn - head.size(), ' ') : "\n" + indent;
  std::string_view help = option.help;
  for (auto nl = help.find('\n'); nl != std::string_view::npos; nl = help.find('\n')) {
    text += fmt::format("{}\n{}", help.substr(0, nl), indent);
    help.remove_prefix(nl + 1);
  }
  text += fmt::format("{}\n", help);
  if (option.kind != Kind::kAction) {
    std::string env = fmt::format("{}env: {}", indent, variable_example(option));
    if (!option.tini_variable.empty()) {
      const bool fits = env.size() + 2 + option.tini_variable.size() <= kHelpWidth;
      env += fmt::format("{}{}", fits ? ", " : "\n" + indent + "     ", option.tini_variable);
    }
    text += env + "\n";
  }
  return text;
}

std::string short_usage_text() {
  return fmt::format("{}(trainit --help: every option, with its variable)\n", kSynopsis);
}

std::string usage_text() {
  std::string text = fmt::format("{}{}", kSynopsis, kUsageHead);
  for (const OptionSpec& option : option_table()) {
    if (!option.heading.empty()) {
      text += fmt::format("\n{}\n", option.heading);
    }
    text += option_usage(option);
  }
  std::string documented;
  std::size_t line = 0;
  for (const DocumentedVariable& v : kDocumentedVariables) {
    if (line > 0 && line + 1 + v.name.size() > kHelpWidth) {
      documented += "\n";
      line = 0;
    }
    documented += fmt::format("{}{}", line == 0 ? "  " : " ", v.name);
    line += (line == 0 ? 2 : 1) + v.name.size();
  }
  // ",\nbut for A, B, ...": the variables the ranks read, each line within
  // the help's width, the last one with the sentence's end.
  constexpr std::string_view kReadBy = ", which the ranks read";  // kUsageTail ends it with '.'

  std::vector<std::string_view> passed;
  for (const DocumentedVariable& v : kDocumentedVariables) {
    if (v.passed_on) {
      passed.push_back(v.name);
    }
  }
  std::string passed_on;
  for (size_t i = 0; i < passed.size(); ++i) {
    const size_t column = passed_on.size() - passed_on.rfind('\n') - 1;   // npos + 1 wraps to 0
    const size_t after = i + 1 < passed.size() ? 1 : kReadBy.size() + 1;  // its ',' or the sentence's end
    const bool wrap = column + 2 + passed[i].size() + after > kHelpWidth;
    passed_on += fmt::format("{}{}", i == 0 ? ",\nbut for " : wrap ? ",\n" : ", ", passed[i]);
  }
  text += fmt::format(kUsageTail, documented + "\n", passed_on.empty() ? "" : passed_on + std::string(kReadBy));
  return text;
}

std::string_view license_text() {
  return kLicense;
}
std::string_view version_text() {
  return "trainit version " TRAINIT_VERSION "\n";
}

}  // namespace trainit
