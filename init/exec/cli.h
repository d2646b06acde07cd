// The command line and trainit's variables: tini's flags and variables, plus
// trainit's own options.
//
// One table (option_table()) is the one place an option is described: its
// long name, its short flag if any, what it takes and how a value is read
// into Options, its default, its help, and what `trainit plan` makes of it.
// The parser, the variables (TRAINIT_<LONG_NAME>, and tini's three), --help,
// `trainit plan --help`, the settings a plan shows and the options reference
// (docs/reference/options.md, init/tools/options_doc.h) are all made from it: a new
// option is a row, a field and a use. The row points at the field; the field
// is in the settings of whoever uses it (PlanOptions for the planner, the
// job phases' structs of job_settings.h, Options itself for exec mode), with
// its default written there once; and it gets its variable and its
// documentation for free.
//
// parse_cli() is pure but for one question to the kernel (who runs trainit,
// for the plan): argv and an environment in, Options or a one-line error out.
// main() turns an error into the short usage on stderr and exit 64, and logs
// Options::warnings.
#pragma once

#include <bitset>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "exec/job_settings.h"
#include "plan/plan.h"
#include "proc/credentials.h"

namespace trainit {

enum class Action { kRun, kHelp, kVersion, kLicense };
enum class Ready { kSpawn, kNotify };

// Where an option's value came from.
enum class SettingSource { kDefault, kVariable, kCommandLine };
struct Origin {
  SettingSource source = SettingSource::kDefault;
  std::string variable;  // kVariable: its name (TRAINIT_GRACE, TINI_VERBOSITY)
};

// Every option's value. Those the planner reads (--mode, --restart, ...) are
// the fields Options has of its base, PlanOptions (src/plan/plan.h), under
// the same names; parse_cli() also settles PlanOptions' is_root and user. The
// run and `trainit plan` hand the planner the parsed options as they are.
struct Options : PlanOptions {
  Action action = Action::kRun;
  int verbosity = 1;                         // -v (one more), --verbosity N
  bool verbosity_given = false;              // a level was given (--verbosity N, a variable), not only -v
  int parent_death_signal = 0;               // -p, --parent-death-signal SIGNAL
  bool kill_process_group = false;           // -g, --kill-process-group
  bool warn_on_reap = false;                 // -w, --warn-on-reap
  std::bitset<256> exit_zero;                // -e, --exit-zero CODE: these child exit codes become 0
  Duration grace = std::chrono::seconds(8);  // --grace SECONDS
  Duration stop_delay{0};                    // --stop-delay SECONDS
  bool drain = true;                         // --no-drain: exit at once when the child does (tini)
  bool forward_only = false;                 // --forward-only: SIGTERM/SIGINT only forwarded (tini)
  Ready ready = Ready::kSpawn;               // --ready spawn|notify: when to tell our supervisor READY=1
  // Job modes.
  Duration rank_table_timeout = std::chrono::seconds(1800);  // --rank-table-timeout SECONDS
  std::string status_file;                                   // --status-file PATH; empty: the default
  std::string termination_log = "/dev/termination-log";      // --termination-log PATH|off; empty: off
  // The job phases' settings (job_settings.h): --preflight, --preflight-timeout,
  // --device-check, --coll-arena, --hang-timeout, --hang-action; and, for
  // several hosts (MA_NUM_HOSTS > 1) and --mode mpi, --peer-timeout,
  // --barrier-timeout, --peer-loss, --job-secret-file.
  SpawnSettings spawn;
  PeerSettings peers;
  std::string as_user;  // --as-user NAME: trainit plan only
  // Least privilege: PROGRAM, or every process of a job but sshd.
  std::string run_user;              // --user NAME|UID[:GROUP|:GID]; empty: trainit's own
  CapsRequest caps;                  // --caps keep|drop|LIST
  bool no_new_privs = false;         // --no-new-privs
  bool allow_job_ptrace = false;     // --allow-job-ptrace: CAP_SYS_PTRACE for a --user job
  std::vector<std::string> redact;   // --redact PATTERN: more secret variable names (globs)
  std::vector<std::string> command;  // PROGRAM ARGS...

  // Filled by parse_cli(): where each option of option_table() got its value
  // (same order), and one line per TRAINIT_* variable that names nothing
  // trainit knows (a typo must not pass silently).
  std::vector<Origin> origins;
  std::vector<std::string> warnings;
};

// What an option takes.
enum class Kind {
  kAction,  // -h, --version, -l: something to do instead of running; no variable
  kFlag,    // no value; its variable says 1/true/yes/on or 0/false/no/off
  kValue,   // one value (--grace 2, --grace=2, -pKILL); the last one given wins
  kList,    // a value, repeatable (-e 2 -e 143); its variable is a list: "2,143" or "2 143"
  kLevel,   // -v counts one up; --verbosity N and the variables give the level itself
};

struct OptionSpec {
  std::string_view name;        // the long name, without "--"; TRAINIT_<NAME> is its variable
  char short_name = 0;          // tini's one-letter flag, or 0
  Kind kind = Kind::kValue;     //
  std::string_view value_name;  // kValue, kList, kLevel: in --help ("SECONDS")
  // kValue, kList, kLevel: the values it takes, for the reference ("an
  // integer in 0-10"). Flags and actions take none.
  std::string_view values;
  // kValue, kList (one item), kLevel (a level): reads `value` into `o`. The
  // error is only the reason ("expected seconds such as 8 or 0.5"): the
  // parser names the option or variable and quotes the value.
  Result<void> (*apply)(Options& o, std::string_view value) = nullptr;
  void (*set)(Options& o, bool on) = nullptr;  // kFlag and kAction; kLevel: -v, one level more
  // The value as `trainit plan` shows it; nullopt where it has none (no
  // --max-restarts: no limit). Null for actions.
  std::optional<std::string> (*show)(const Options& o) = nullptr;
  // The default, in words, for the reference: only where show() of the
  // defaults is nullopt ("no limit"); the others' default is that show(),
  // read off Options itself.
  std::string_view default_text;
  // The planner reads it: it sets a field of PlanOptions (--as-user: who the
  // plan is for), so it changes what `trainit plan` prints beyond "settings"
  // (which show every option but the actions, shaping the plan or not).
  bool shapes_plan = false;
  std::string_view tini_variable;  // tini's variable for the same, or empty
  std::string_view help;           // lines of --help, '\n' between them
  std::string_view heading;        // starts a section of --help ("Job modes:")
};

// Every option, in --help's order.
[[nodiscard]] std::span<const OptionSpec> option_table() noexcept;
// "TRAINIT_" + the long name upper-cased, '-' as '_': TRAINIT_NO_DRAIN. Empty
// for actions, which have none.
[[nodiscard]] std::string variable_name(const OptionSpec& option);
// Whether `variable` is some option's TRAINIT_<NAME>.
[[nodiscard]] bool names_an_option(std::string_view variable) noexcept;

// `argv` (argv[0] is the program's name, or "plan") and the environment
// (`envp`: "NAME=value" entries, null-terminated, as environ; may be null).
// An option given on the command line wins over its variables (every one of
// its variables is then left unread); TRAINIT_<NAME> wins over tini's. A
// variable set but empty counts as unset, except tini's flags (TINI_SUBREAPER,
// TINI_KILL_PROCESS_GROUP), which are on when set at all, as in tini. Who
// trainit runs as (is_root, user) is --as-user's user, else the effective
// user's (geteuid): the run refuses --as-user (main()).
Result<Options> parse_cli(int argc, const char* const* argv, const char* const* envp);

// What the planner reads of the options: their PlanOptions part, as parsed
// (who trainit runs as included).
[[nodiscard]] inline const PlanOptions& plan_options(const Options& options) noexcept {
  return options;
}

// Each option but the actions, as `trainit plan` shows it: its value and
// where it came from ("default", "command line", "variable TRAINIT_GRACE").
[[nodiscard]] std::vector<Setting> settings_of(const Options& options);

// The usage text (ends with a newline): --help's whole, and the synopsis
// with a pointer to it, which follows a usage error.
[[nodiscard]] std::string usage_text();
[[nodiscard]] std::string short_usage_text();
// `option` as --help lists it: its flags and value, its help beside them
// from column 26, then its variables ("env: TRAINIT_GRACE=SECONDS").
[[nodiscard]] std::string option_usage(const OptionSpec& option);
// The default of `option` as the reference states it: its default_text, or
// else the value `trainit plan` shows when nothing sets it. Empty for
// actions.
[[nodiscard]] std::string default_of(const OptionSpec& option);
[[nodiscard]] std::string_view license_text();
[[nodiscard]] std::string_view version_text();

}  // namespace trainit
