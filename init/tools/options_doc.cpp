#include "tools/options_doc.h"

#include <fmt/core.h>

#include <string_view>

#include "base/env.h"
#include "exec/cli.h"

namespace trainit {
namespace {

constexpr std::string_view kIntro =
    "# trainit's options\n"
    "\n"
    "<!-- Generated from the option table in init/exec/options.cpp: do not edit. Rewrite it with\n"
    "     cmake --build --preset release --target update_options_doc -->\n"
    "\n"
    "Every option of `trainit [OPTIONS] [--] PROGRAM [ARGS...]` and of\n"
    "`trainit plan [OPTIONS] [--] COMMAND [ARG...]`. The same table makes the\n"
    "parser, `trainit --help` and the settings `trainit plan` shows, so this page\n"
    "says what the binary does.\n"
    "\n"
    "- **Variables.** Every option but `-h`, `--version` and `-l` can be given as\n"
    "  its variable: `TRAINIT_` and the long name in capitals, `-` as `_`. A flag's\n"
    "  variable takes `1`, `true`, `yes` or `on` (`0`, `false`, `no` or `off`: not\n"
    "  given); tini's flag variables are on when set at all. An empty variable is\n"
    "  unset.\n"
    "- **Precedence.** The command line wins, and leaves the option's variables\n"
    "  unread; then `TRAINIT_<OPTION>`, then tini's variable, then the default.\n"
    "- **In `trainit plan`.** The plan's `\"settings\"` show every option but the\n"
    "  actions, with its value and where it came from (`\"default\"`,\n"
    "  `\"command line\"`, `\"variable TRAINIT_GRACE\"`). *shapes the plan*: the\n"
    "  planner reads it too, so it can change what the plan starts, not only its\n"
    "  settings (`trainit plan --help` lists these).\n";

// The first rows come before any heading of the table.
constexpr std::string_view kFirstSection = "Options";

constexpr std::string_view kTableHead =
    "| option | variable | values | default | what it does | in `trainit plan` |\n"
    "|---|---|---|---|---|---|\n";

// `text` as Markdown shows it literally in a table cell: no cell ends at a
// '|', and <host> is no HTML tag.
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '<' || c == '>' || c == '*' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// "`-e`, `--exit-zero CODE`"; a level's short flag, which takes no value:
// "`-v` (one more, no value), `--verbosity N`".
std::string flags_cell(const OptionSpec& option) {
  std::string value = option.value_name.empty() ? "" : fmt::format(" {}", option.value_name);
  std::string cell = fmt::format("`--{}{}`", option.name, value);
  if (option.short_name != 0 && option.kind == Kind::kLevel) {
    return fmt::format("`-{}` (one more, no value), {}", option.short_name, cell);
  }
  return option.short_name != 0 ? fmt::format("`-{}`, {}", option.short_name, cell) : cell;
}

std::string variables_cell(const OptionSpec& option) {
  if (option.kind == Kind::kAction) {
    return "—";
  }
  std::string cell = fmt::format("`{}`", variable_name(option));
  if (!option.tini_variable.empty()) {
    cell += fmt::format(", `{}`", option.tini_variable);
  }
  return cell;
}

std::string values_cell(const OptionSpec& option) {
  switch (option.kind) {
    case Kind::kAction:
      return "—";
    case Kind::kFlag:
      return "none: a flag";
    default:
      return escaped(option.values);
  }
}

// A value `trainit plan` would show, as code; words (default_text) as text.
std::string default_cell(const OptionSpec& option) {
  if (option.kind == Kind::kAction) {
    return "—";
  }
  std::string text = default_of(option);
  return option.default_text.empty() ? fmt::format("`{}`", text) : escaped(text);
}

// The help of --help, its lines joined.
std::string help_cell(const OptionSpec& option) {
  std::string text(option.help);
  for (char& c : text) {
    if (c == '\n') {
      c = ' ';
    }
  }
  return escaped(text);
}

std::string plan_cell(const OptionSpec& option) {
  if (option.kind == Kind::kAction) {
    return "—";
  }
  return option.shapes_plan ? "settings; *shapes the plan*" : "settings";
}

std::string section(std::string_view heading) {
  if (heading.ends_with(':')) {
    heading.remove_suffix(1);
  }
  return fmt::format("\n## {}\n\n{}", heading, kTableHead);
}

// trainit's variables that are no option's (base/env.h).
std::string other_variables() {
  std::string text =
      "\n## Other variables\n"
      "\n"
      "Any other `TRAINIT_*` name is warned about (a typo must not pass\n"
      "silently), but for these, which are no option's. None of trainit's\n"
      "variables reaches PROGRAM or the ranks, but for those marked *passed on*.\n"
      "\n";
  for (const DocumentedVariable& v : kDocumentedVariables) {
    text += fmt::format("- `{}`{}\n", v.name, v.passed_on ? ": *passed on*" : "");
  }
  return text;
}

}  // namespace

std::string options_reference() {
  std::string text(kIntro);
  text += section(kFirstSection);
  for (const OptionSpec& option : option_table()) {
    if (!option.heading.empty()) {
      text += section(option.heading);
    }
    text += fmt::format("| {} | {} | {} | {} | {} | {} |\n", flags_cell(option), variables_cell(option),
                        values_cell(option), default_cell(option), help_cell(option), plan_cell(option));
  }
  text += other_variables();
  return text;
}

}  // namespace trainit
