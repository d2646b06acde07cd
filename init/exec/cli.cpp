#include "exec/cli.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/env.h"
#include "os/text.h"

namespace trainit {
namespace {

// --- Parsing ------------------------------------------------------------------

// An option as the command line gave it, applied once the variables are.
struct Given {
  std::size_t option;
  std::string_view value;  // kValue, kList; kLevel's long form
  bool is_short;           // spelled -x (for kLevel: one level more)
};

// How `option` was written, for a message: "-e" or "--exit-zero".
std::string spelled(const OptionSpec& option, bool is_short) {
  return is_short ? fmt::format("-{}", option.short_name) : fmt::format("--{}", option.name);
}

const OptionSpec* find_long(std::string_view name) {
  for (const OptionSpec& option : option_table()) {
    if (option.name == name) {
      return &option;
    }
  }
  return nullptr;
}

const OptionSpec* find_short(char flag) {
  for (const OptionSpec& option : option_table()) {
    if (option.short_name != 0 && option.short_name == flag) {
      return &option;
    }
  }
  return nullptr;
}

std::size_t index_of(const OptionSpec* option) {
  return static_cast<std::size_t>(option - option_table().data());
}

bool takes_value(const OptionSpec& option, bool is_short) {
  return option.kind == Kind::kValue || option.kind == Kind::kList || (option.kind == Kind::kLevel && !is_short);
}

// Reads the options of argv into `given` and returns where PROGRAM starts.
Result<int> read_command_line(int argc, const char* const* argv, std::vector<Given>& given) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      return i + 1;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      return i;  // the program: everything from here on is its
    }
    if (arg[1] == '-') {
      std::string_view name = arg.substr(2);
      std::string_view value;
      const auto eq = name.find('=');
      if (eq != std::string_view::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      const OptionSpec* option = find_long(name);
      if (option == nullptr) {
        return Error{fmt::format("unknown option {}", quote_for_message(arg)), 0};
      }
      if (!takes_value(*option, false) && eq != std::string_view::npos) {
        return Error{fmt::format("--{} takes no value, got {}", name, quote_for_message(arg)), 0};
      }
      if (takes_value(*option, false) && eq == std::string_view::npos) {
        if (i + 1 >= argc) {
          return Error{fmt::format("--{} needs a value", name), 0};
        }
        value = argv[++i];
      }
      given.push_back({index_of(option), value, false});
      continue;
    }
    for (std::size_t k = 1; k < arg.size(); ++k) {
      const OptionSpec* option = find_short(arg[k]);
      if (option == nullptr) {
        return Error{fmt::format("unknown option {}", quote_for_message(fmt::format("-{}", arg[k]))), 0};
      }
      std::string_view value;
      if (takes_value(*option, true)) {
        if (k + 1 < arg.size()) {
          value = arg.substr(k + 1);
        } else if (i + 1 < argc) {
          value = argv[++i];
        } else {
          return Error{fmt::format("-{} needs a value", arg[k]), 0};
        }
        k = arg.size();
      }
      given.push_back({index_of(option), value, true});
    }
  }
  return i;
}

// 1, true, yes, on; 0, false, no, off (in any case).
std::optional<bool> parse_flag(std::string_view text) {
  auto is = [text](std::string_view word) {
    return std::equal(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
      return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
    });
  };
  if (is("1") || is("true") || is("yes") || is("on")) {
    return true;
  }
  if (is("0") || is("false") || is("no") || is("off")) {
    return false;
  }
  return std::nullopt;
}

// Applies `value` of `option`'s variable `name`.
Result<void> apply_variable(const OptionSpec& option, std::string_view name, std::string_view value, Options& o) {
  auto bad = [&](std::string_view why) {
    return Error{fmt::format("{}={}: {}", name, quote_for_message(value), why), 0};
  };
  switch (option.kind) {
    case Kind::kAction:
      return {};  // never: actions have no variable
    case Kind::kFlag: {
      auto on = parse_flag(value);
      if (!on) {
        return bad("expected 1, true, yes or on, or 0, false, no or off");
      }
      option.set(o, *on);
      return {};
    }
    case Kind::kList: {
      std::string_view rest = value;
      while (!rest.empty()) {
        const auto end = std::min(rest.find_first_of(", \t"), rest.size());
        if (end > 0) {
          if (auto r = option.apply(o, rest.substr(0, end)); !r) {
            return bad(fmt::format("{}: {}", quote_for_message(rest.substr(0, end)), r.error().message));
          }
        }
        rest.remove_prefix(std::min(end + 1, rest.size()));
      }
      return {};
    }
    case Kind::kValue:
    case Kind::kLevel:
      if (auto r = option.apply(o, value); !r) {
        return bad(r.error().message);
      }
      return {};
  }
  return {};
}

// The option whose variable is `name` (TRAINIT_NO_DRAIN), or null.
const OptionSpec* option_of_variable(std::string_view name) {
  if (!name.starts_with(kTrainitPrefix)) {
    return nullptr;
  }
  name.remove_prefix(kTrainitPrefix.size());
  for (const OptionSpec& option : option_table()) {
    if (option.kind != Kind::kAction &&
        std::equal(name.begin(), name.end(), option.name.begin(), option.name.end(), [](char v, char n) {
          return v == (n == '-' ? '_' : n >= 'a' && n <= 'z' ? static_cast<char>(n - 'a' + 'A') : n);
        })) {
      return &option;
    }
  }
  return nullptr;
}

// Levenshtein distance, for names of at most a few dozen bytes.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The warning for TRAINIT_* name `name` that is no option's nor documented,
// with the option's variable it may be a typo of.
std::string unknown_variable_warning(std::string_view name) {
  constexpr std::size_t kMaxTypo = 2;
  std::string closest;
  std::size_t best = kMaxTypo + 1;
  if (name.size() < 64) {
    for (const OptionSpec& option : option_table()) {
      std::string candidate = variable_name(option);
      if (std::size_t d = candidate.empty() ? best : edit_distance(name, candidate); d < best) {
        best = d;
        closest = std::move(candidate);
      }
    }
  }
  return fmt::format("{} is not one of trainit's variables (trainit --help lists them): ignored{}", one_line(name),
                     closest.empty() ? "" : fmt::format("; did you mean {}?", closest));
}

bool is_documented_variable(std::string_view name) {
  return std::any_of(std::begin(kDocumentedVariables), std::end(kDocumentedVariables),
                     [name](const DocumentedVariable& v) { return v.name == name; });
}

// The variables of each option (the first of a name wins, as for getenv),
// and a warning for each TRAINIT_* name that is no one's.
struct Variables {
  std::vector<std::optional<std::string_view>> trainit =
      std::vector<std::optional<std::string_view>>(option_table().size());  // TRAINIT_<OPTION>'s value
  std::vector<std::optional<std::string_view>> tini =
      std::vector<std::optional<std::string_view>>(option_table().size());  // tini's variable's value
};

Variables read_variables(const char* const* envp, std::vector<std::string>& warnings) {
  Variables found;
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value = entry.substr(eq + 1);
    if (name.starts_with(kTrainitPrefix)) {
      if (const OptionSpec* option = option_of_variable(name)) {
        auto& slot = found.trainit[index_of(option)];
        if (!slot) {
          slot = value;
        }
      } else if (!is_documented_variable(name)) {
        warnings.push_back(unknown_variable_warning(name));
      }
    } else if (name.starts_with("TINI_")) {
      for (const OptionSpec& option : option_table()) {
        if (option.tini_variable == name && !found.tini[index_of(&option)]) {
          found.tini[index_of(&option)] = value;
        }
      }
    }
  }
  return found;
}

Result<void> apply_variables(const Variables& found, const std::vector<bool>& on_command_line, Options& o) {
  for (std::size_t i = 0; i < option_table().size(); ++i) {
    const OptionSpec& option = option_table()[i];
    if (on_command_line[i]) {
      continue;  // the command line wins: its variables stay unread
    }
    if (const auto& value = found.trainit[i]; value && !value->empty()) {
      if (auto r = apply_variable(option, variable_name(option), *value, o); !r) {
        return r;
      }
      o.origins[i] = {SettingSource::kVariable, variable_name(option)};
    } else if (const auto& tini = found.tini[i]; tini && (option.kind == Kind::kFlag || !tini->empty())) {
      if (option.kind == Kind::kFlag) {
        option.set(o, true);  // tini's flags are on when set at all, whatever their value
      } else if (auto r = apply_variable(option, option.tini_variable, *tini, o); !r) {
        return r;
      }
      o.origins[i] = {SettingSource::kVariable, std::string(option.tini_variable)};
    }
  }
  return {};
}

Result<void> apply_given(const Given& g, Options& o) {
  const OptionSpec& option = option_table()[g.option];
  o.origins[g.option] = {SettingSource::kCommandLine, {}};
  if (option.kind == Kind::kAction || option.kind == Kind::kFlag || (option.kind == Kind::kLevel && g.is_short)) {
    option.set(o, true);
    return {};
  }
  if (auto r = option.apply(o, g.value); !r) {
    return Error{fmt::format("{} {}: {}", spelled(option, g.is_short), quote_for_message(g.value), r.error().message),
                 0};
  }
  return {};
}

// Who the plan is for: --as-user's user (`trainit plan` only: main() refuses
// it for a run), else the user trainit runs as.
void settle_identity(Options& o) {
  if (o.as_user.empty()) {
    o.is_root = ::geteuid() == 0;
    o.user = o.is_root ? "root" : "";
  } else {
    o.is_root = o.as_user == "root";
    o.user = o.as_user;
  }
  // The job's processes run as --user's user: mpirun's ssh logs in to the
  // job's sshd as that user (a uid alone names no one sshd could allow).
  const std::string_view name = std::string_view(o.run_user).substr(0, o.run_user.find(':'));
  if (!name.empty() && !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    o.user = std::string(name);
  }
}

}  // namespace

std::string variable_name(const OptionSpec& option) {
  if (option.kind == Kind::kAction) {
    return {};
  }
  std::string name(kTrainitPrefix);
  for (char c : option.name) {
    name += c == '-' ? '_' : c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return name;
}

bool names_an_option(std::string_view variable) noexcept {
  return option_of_variable(variable) != nullptr;
}

Result<Options> parse_cli(int argc, const char* const* argv, const char* const* envp) {
  Options o;
  o.origins.resize(option_table().size());
  std::vector<Given> given;
  auto program = read_command_line(argc, argv, given);
  if (!program) {
    return program.error();
  }
  std::vector<bool> on_command_line(option_table().size());
  for (const Given& g : given) {
    on_command_line[g.option] = true;
  }
  const Variables found = read_variables(envp, o.warnings);
  if (auto r = apply_variables(found, on_command_line, o); !r) {
    return r.error();
  }
  for (const Given& g : given) {
    if (auto r = apply_given(g, o); !r) {
      return r.error();
    }
  }
  for (int i = *program; i < argc; ++i) {
    o.command.emplace_back(argv[i]);
  }
  if (o.action == Action::kRun && o.command.empty()) {
    return Error{"no program given to run", 0};
  }
  if (!o.command.empty() && o.command[0].empty()) {  // exec would fail on it after the job's set-up
    return Error{"the program's name is empty", 0};
  }
  settle_identity(o);
  return o;
}

std::vector<Setting> settings_of(const Options& options) {
  std::vector<Setting> settings;
  for (std::size_t i = 0; i < option_table().size(); ++i) {
    const OptionSpec& option = option_table()[i];
    if (option.kind == Kind::kAction) {
      continue;
    }
    const Origin& origin = i < options.origins.size() ? options.origins[i] : Origin{};
    std::string source = origin.source == SettingSource::kDefault       ? "default"
                         : origin.source == SettingSource::kCommandLine ? "command line"
                                                                        : "variable " + origin.variable;
    settings.push_back({std::string(option.name), option.show(options), std::move(source)});
  }
  return settings;
}

std::string default_of(const OptionSpec& option) {
  if (option.kind == Kind::kAction) {
    return {};
  }
  if (!option.default_text.empty()) {
    return std::string(option.default_text);
  }
  return option.show(Options{}).value_or("");
}

}  // namespace trainit
