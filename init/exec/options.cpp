// The option table: every option of trainit as one row (exec/cli.h,
// OptionSpec): its names, its variables, how its value is read into Options,
// and how `trainit plan` and the docs show it. cli.cpp parses with it.
#include <fmt/core.h>

#include <span>
#include <type_traits>

#include "base/env.h"
#include "base/number.h"
#include "exec/cli.h"
#include "os/text.h"
#include "proc/signals.h"

namespace trainit {
namespace {

// --- Reading values: each returns the reason only, the parser says where ----

Error reason(std::string_view text) {
  return Error{std::string(text), 0};
}

Result<Duration> seconds_value(std::string_view value) {
  auto seconds = parse_seconds(value);
  if (!seconds) {
    return reason("expected seconds such as 8 or 0.5 (at most 86400)");
  }
  return *seconds;
}

// Bytes: digits, optionally K, M or G (powers of 1024), at most 64G.
Result<size_t> size_value(std::string_view value) {
  uint64_t scale = 1;
  if (!value.empty()) {
    switch (value.back()) {
      case 'K':
      case 'k':
        scale = uint64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        scale = uint64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        scale = uint64_t{1} << 30;
        break;
      default:
        break;
    }
  }
  auto digits = scale == 1 ? value : value.substr(0, value.size() - 1);
  constexpr uint64_t kMaxBytes = uint64_t{64} << 30;
  auto n = parse_decimal(digits, 0, kMaxBytes / scale);
  if (!n) {
    return reason("expected a size such as 32M, 1G or 0 (at most 64G), or off");
  }
  return static_cast<size_t>(*n * scale);
}

// "8", "0.3", "1.25": the shortest text parse_seconds() reads back.
std::string seconds_text(Duration d) {
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(d);
  std::string text = std::to_string(whole.count());
  if (auto ns = (d - whole).count(); ns != 0) {
    std::string fraction = fmt::format("{:09}", ns);
    fraction.erase(fraction.find_last_not_of('0') + 1);
    text += "." + fraction;
  }
  return text;
}

std::string bool_text(bool on) {
  return on ? "true" : "false";
}

// The readers several rows share.
Result<void> set_seconds(Duration& out, std::string_view value) {
  auto seconds = seconds_value(value);
  if (!seconds) {
    return seconds.error();
  }
  out = *seconds;
  return {};
}

Result<void> set_path(std::string& out, std::string_view value) {
  if (value.empty() || value[0] != '/') {
    return reason("expected an absolute path");
  }
  out = std::string(value);
  return {};
}

std::optional<std::string> optional_text(const std::string& value) {
  return value.empty() ? std::nullopt : std::optional(value);
}

// --- The table --------------------------------------------------------------

// -Wextra's -Wmissing-field-initializers names every member a designated
// initializer leaves out, default member initializer or not: each row below
// gives only what it needs and relies on the defaults for the rest.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

// The rows below point into Options by a path of members: `&Options::grace`,
// or `&Options::peers, &PeerSettings::peer_loss` for a phase's settings
// (job_settings.h). field<Path...>(o) is that member of `o`.
template <auto... Path, typename O>
constexpr auto& field(O& o) {
  return (o.*....*Path);
}

// A row for a Duration field: its value name, values, reader, and plan form
// (unless the row shows it its own way), one for all.
template <auto... Path>
constexpr OptionSpec seconds_option(OptionSpec row) {
  row.value_name = "SECONDS";
  row.values = "seconds: digits, up to 9 after a '.' (8, 0.5, .25); at most 86400";
  row.apply = [](Options& o, std::string_view value) { return set_seconds(field<Path...>(o), value); };
  if (row.show == nullptr) {
    row.show = [](const Options& o) -> std::optional<std::string> { return seconds_text(field<Path...>(o)); };
  }
  return row;
}

// A row for a std::string field holding an absolute path; empty, shown as
// null, is the default the row's default_text describes.
template <auto... Path>
constexpr OptionSpec path_option(OptionSpec row) {
  row.value_name = "PATH";
  row.values = "an absolute path";
  row.apply = [](Options& o, std::string_view value) { return set_path(field<Path...>(o), value); };
  row.show = [](const Options& o) { return optional_text(field<Path...>(o)); };
  return row;
}

// What an integer row reads: a number in [Min, Max], called "an integer" or,
// for a port, "a port" in the values and in the error.
enum class Number { kInteger, kPort };

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};

// A row for an integer field (plain, or std::optional: unset shows null) in
// [Min, Max]: its value name (N or PORT), reader and plan form. The row
// gives its values text, which states the same range ("an integer in
// 1-1024").
template <Number What, uint64_t Min, uint64_t Max, auto... Path>
constexpr OptionSpec integer_option(OptionSpec row) {
  row.value_name = What == Number::kPort ? "PORT" : "N";
  row.apply = [](Options& o, std::string_view value) -> Result<void> {
    auto n = parse_decimal(value, Min, Max);
    if (!n) {
      return reason(fmt::format("expected {} in {}-{}", What == Number::kPort ? "a port" : "an integer", Min, Max));
    }
    auto& out = field<Path...>(o);
    out = static_cast<typename Unwrapped<std::remove_cvref_t<decltype(out)>>::type>(*n);
    return {};
  };
  row.show = [](const Options& o) -> std::optional<std::string> {
    const auto& value = field<Path...>(o);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>,
                                 typename Unwrapped<std::remove_cvref_t<decltype(value)>>::type>) {
      return std::to_string(value);
    } else {
      return value ? std::optional(std::to_string(*value)) : std::nullopt;
    }
  };
  return row;
}

constexpr OptionSpec kOptions[] = {
    {.name = "help",
     .short_name = 'h',
     .kind = Kind::kAction,
     .set = [](Options& o, bool) { o.action = Action::kHelp; },
     .help = "show this help and exit"},
    {.name = "version",
     .kind = Kind::kAction,
     .set = [](Options& o, bool) { o.action = Action::kVersion; },
     .help = "show the version and exit"},
    {.name = "license",
     .short_name = 'l',
     .kind = Kind::kAction,
     .set = [](Options& o, bool) { o.action = Action::kLicense; },
     .help = "show the license and exit"},
    {.name = "verbosity",
     .short_name = 'v',
     .kind = Kind::kLevel,
     .value_name = "N",
     .values = "an integer in 0-10 (-v: one more)",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       auto n = parse_decimal(value, 0, 10);
       if (!n) {
         return reason("expected an integer in 0-10");
       }
       o.verbosity = static_cast<int>(*n);
       o.verbosity_given = true;
       return {};
     },
     // -v counts up to 10 too: what `trainit plan` shows can be given back.
     .set = [](Options& o, bool) { o.verbosity = std::min(o.verbosity + 1, 10); },
     .show = [](const Options& o) -> std::optional<std::string> { return std::to_string(o.verbosity); },
     .tini_variable = "TINI_VERBOSITY",
     .help = "how much trainit says: 0 errors, 1 and warnings\n"
             "(exec mode's default), 2 info (job modes' default),\n"
             "3 debug"},
    {.name = "subreaper",
     .short_name = 's',
     .kind = Kind::kFlag,
     .set = [](Options&, bool) {},  // nothing to set: trainit is a subreaper whenever it is not PID 1
     .show = [](const Options&) -> std::optional<std::string> { return std::nullopt; },
     .default_text = "not given (a subreaper anyway when not PID 1)",
     .tini_variable = "TINI_SUBREAPER",
     .help = "register as a child subreaper (tini's; done anyway\n"
             "when not PID 1)"},
    {.name = "parent-death-signal",
     .short_name = 'p',
     .value_name = "SIGNAL",
     .values = "a signal: its name (SIGKILL, KILL), number, or SIGRTMIN+N",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       int signo = signal_from_name(value);
       if (signo == 0) {
         return reason("unknown signal (a name such as SIGKILL or KILL, a number, SIGRTMIN+N)");
       }
       o.parent_death_signal = signo;
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       if (o.parent_death_signal == 0) {
         return std::nullopt;
       }
       // glibc's own real-time signals (32, 33) have no name that reads back.
       const std::string_view name = signal_name(o.parent_death_signal);
       return signal_from_name(name) == o.parent_death_signal ? std::string(name)
                                                              : std::to_string(o.parent_death_signal);
     },
     .default_text = "none",
     .help = "have trainit receive SIGNAL when its parent dies\n"
             "(e.g. SIGKILL)"},
    {.name = "kill-process-group",
     .short_name = 'g',
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.kill_process_group = on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(o.kill_process_group); },
     .tini_variable = "TINI_KILL_PROCESS_GROUP",
     .help = "send signals to the child's whole process group"},
    {.name = "warn-on-reap",
     .short_name = 'w',
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.warn_on_reap = on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(o.warn_on_reap); },
     .help = "warn each time an orphaned zombie is reaped"},
    {.name = "exit-zero",
     .short_name = 'e',
     .kind = Kind::kList,
     .value_name = "CODE",
     .values = "an exit code in 0-255, repeatable; the variable: a list (2,143 or \"2 143\")",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       auto code = parse_decimal(value, 0, 255);
       if (!code) {
         return reason("expected an exit code in 0-255");
       }
       o.exit_zero.set(static_cast<std::size_t>(*code));
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       std::string codes;
       for (std::size_t code = 0; code < o.exit_zero.size(); ++code) {
         if (o.exit_zero.test(code)) {
           codes += (codes.empty() ? "" : ",") + std::to_string(code);
         }
       }
       return codes.empty() ? std::nullopt : std::optional(codes);
     },
     .default_text = "none",
     .help = "exit 0 when the child exits with CODE (0-255;\n"
             "repeatable; the variable takes a list: 2,143)"},
    seconds_option<&Options::grace>({.name = "grace",
                                     .help = "how long processes get between SIGTERM and SIGKILL,\n"
                                             "when trainit is stopped or drains (fractions\n"
                                             "allowed; default 8)"}),
    seconds_option<&Options::stop_delay>({.name = "stop-delay",
                                          .help = "wait this long before passing on SIGTERM/SIGINT\n"
                                                  "(default 0)"}),
    {.name = "no-drain",
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.drain = !on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(!o.drain); },
     .help = "exit as soon as the child exits, as tini does,\n"
             "instead of stopping every remaining process first"},
    {.name = "forward-only",
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.forward_only = on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(o.forward_only); },
     .help = "pass SIGTERM/SIGINT to the child only, as tini does,\n"
             "instead of stopping every process with the SIGKILL\n"
             "escalation"},
    {.name = "restart",
     .value_name = "POLICY",
     .values = "no, on-failure, always",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value == "no") {
         o.restart = Restart::kNo;
       } else if (value == "on-failure") {
         o.restart = Restart::kOnFailure;
       } else if (value == "always") {
         o.restart = Restart::kAlways;
       } else {
         return reason("expected no, on-failure or always");
       }
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return std::string(o.restart == Restart::kNo          ? "no"
                          : o.restart == Restart::kOnFailure ? "on-failure"
                                                             : "always");
     },
     .shapes_plan = true,
     .help = "restart the child: no (default), on-failure, always;\n"
             "job modes: on-failure restarts the whole job"},
    {.name = "max-restarts",
     .value_name = "N",
     .values = "an integer in 0-1000000",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       auto n = parse_decimal(value, 0, 1'000'000);
       if (!n) {
         return reason("expected an integer in 0-1000000");
       }
       o.max_restarts = static_cast<int>(*n);
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return o.max_restarts < 0 ? std::nullopt : std::optional(std::to_string(o.max_restarts));
     },
     .default_text = "no limit",
     .shapes_plan = true,
     .help = "give up after N restarts in a row (job modes: N in\n"
             "all; default: no limit)"},
    {.name = "ready",
     .value_name = "WHEN",
     .values = "spawn, notify",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value != "spawn" && value != "notify") {
         return reason("expected spawn or notify");
       }
       o.ready = value == "spawn" ? Ready::kSpawn : Ready::kNotify;
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return std::string(o.ready == Ready::kSpawn ? "spawn" : "notify");
     },
     .help = "when to send READY=1 to NOTIFY_SOCKET: spawn\n"
             "(default: once the child runs) or notify (trainit\n"
             "serves the child its own NOTIFY_SOCKET and passes on\n"
             "its READY=1 and STATUS=)"},
    {.name = "user",
     .value_name = "USER",
     .values = "NAME, UID, NAME:GROUP or UID:GID",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value.empty() || value.front() == ':' || value.back() == ':' || value.find(':') != value.rfind(':')) {
         return reason("expected NAME, UID, NAME:GROUP or UID:GID");
       }
       o.run_user = std::string(value);
       return {};
     },
     .show = [](const Options& o) { return optional_text(o.run_user); },
     .default_text = "the user running trainit",
     .shapes_plan = true,
     .help = "run PROGRAM (job modes: every process but sshd) as\n"
             "this user, with its groups, HOME, USER and LOGNAME",
     .heading = "Least privilege (PROGRAM; in a job, every process but sshd):"},
    {.name = "caps",
     .value_name = "CAPS",
     .values = "keep, drop, or capabilities (CAP_IPC_LOCK,CAP_SYS_PTRACE)",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value == "keep" || value == "drop") {
         o.caps = {value == "keep" ? CapsPolicy::kKeep : CapsPolicy::kDrop, 0};
         return {};
       }
       auto list = parse_cap_list(value);
       if (!list) {
         return list.error();
       }
       o.caps = {CapsPolicy::kList, *list};
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       switch (o.caps.policy) {
         case CapsPolicy::kKeep:
           return "keep";
         case CapsPolicy::kDrop:
           return "drop";
         case CapsPolicy::kList:
           break;
       }
       return cap_list_text(o.caps.list);
     },
     .help = "their capabilities: keep (default: what the\n"
             "container gave), drop (none at all), or a list\n"
             "kept in every set (CAP_IPC_LOCK,CAP_SYS_PTRACE)"},
    {.name = "allow-job-ptrace",
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.allow_job_ptrace = on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(o.allow_job_ptrace); },
     .help = "let --caps give CAP_SYS_PTRACE to a --user job:\n"
             "its processes can then read and write PID 1's\n"
             "memory (the job secret included), root's power"},
    {.name = "no-new-privs",
     .kind = Kind::kFlag,
     .set = [](Options& o, bool on) { o.no_new_privs = on; },
     .show = [](const Options& o) -> std::optional<std::string> { return bool_text(o.no_new_privs); },
     .help = "set PR_SET_NO_NEW_PRIVS: no set-user-ID or file\n"
             "capabilities gain them anything"},
    {.name = "redact",
     .kind = Kind::kList,
     .value_name = "PATTERN",
     .values = "a variable name or glob (WANDB_*), repeatable; the variable: a list",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value.empty()) {
         return reason("expected a variable name or a glob such as WANDB_*");
       }
       o.redact.emplace_back(value);
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       std::string patterns;
       for (const std::string& p : o.redact) {
         patterns += (patterns.empty() ? "" : ",") + p;
       }
       return patterns.empty() ? std::nullopt : std::optional(patterns);
     },
     .default_text = "none: names holding KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL",
     .help = "hide the values of these variables too (globs;\n"
             "repeatable) wherever trainit writes (logs, status,\n"
             "plan)"},
    {.name = "mode",
     .value_name = "MODE",
     .values = "auto, exec, ascend, mpi, torchrun, torchrun-exec, msrun, msrun-exec, pytorch, tensorflow",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value == "auto") {
         o.mode = kAutoMode;
         return {};
       }
       auto mode = mode_from_name(value);
       if (!mode) {
         return reason(fmt::format("expected auto, {}", mode_names()));
       }
       o.mode = *mode;
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return std::string(o.mode ? mode_name(*o.mode) : "auto");
     },
     .shapes_plan = true,
     .help = "auto (default: torchrun or msrun for MA_RUN_METHOD,\n"
             "ascend when RANK_TABLE_FILE or RANK_TABLE_FILE_V_1_0\n"
             "is set, else exec), exec, ascend, mpi (sshd on every\n"
             "host, mpirun on host 0), torchrun and msrun (their\n"
             "agents' job, natively), torchrun-exec and msrun-exec\n"
             "(the real tools), pytorch (--init_method arguments),\n"
             "tensorflow (--task_index/--ps_hosts/... arguments)",
     .heading = "Job modes:"},
    {.name = "coll-arena",
     .value_name = "SIZE",
     .values = "bytes, or with K, M or G (powers of 1024), at most 64G; or off",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value == "off") {
         o.spawn.arena.heap.reset();
         return {};
       }
       auto bytes = size_value(value);
       if (!bytes) {
         return bytes.error();
       }
       o.spawn.arena.heap = *bytes;
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return o.spawn.arena.heap ? std::to_string(*o.spawn.arena.heap) : std::string("off");
     },
     .help = "the collective arena's heap for trainit_alloc, shared\n"
             "by a host's ranks: bytes, or with K, M or G (default\n"
             "32M); off: no arena"},
    seconds_option<&Options::spawn, &SpawnSettings::arena,
                   &ArenaSettings::hang_timeout>({.name = "hang-timeout",
                                                  .show = [](const Options& o) -> std::optional<std::string> {
                                                    const Duration timeout = o.spawn.arena.hang_timeout;
                                                    return timeout > Duration::zero()
                                                               ? std::optional(seconds_text(timeout))
                                                               : std::nullopt;
                                                  },
                                                  .default_text = "none: no hang detection",
                                                  .help = "report a rank in one collective for longer (default:\n"
                                                          "no hang detection)"}),
    {.name = "hang-action",
     .value_name = "ACTION",
     .values = "report, stop",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value != "report" && value != "stop") {
         return reason("expected report or stop");
       }
       o.spawn.arena.hang_stop = value == "stop";
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return std::string(o.spawn.arena.hang_stop ? "stop" : "report");
     },
     .help = "after --hang-timeout: report (default) or stop the\n"
             "job (exit 75)"},
    {.name = "preflight",
     .value_name = "WHAT",
     .values = "none, devices",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value != "none" && value != "devices") {
         return reason("expected none or devices");
       }
       o.spawn.preflight.devices = value == "devices";
       return {};
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return std::string(o.spawn.preflight.devices ? "devices" : "none");
     },
     .help = "devices: before the ranks start, check each local\n"
             "device (open, alloc, join, allreduce, check) with\n"
             "trainit-device-check; one that fails or hangs fails\n"
             "the job (exit 79). none (default): no such check"},
    seconds_option<&Options::spawn, &SpawnSettings::preflight, &PreflightSettings::timeout>(
        {.name = "preflight-timeout",
         .help = "how long a preflight may take: the devices' (then a\n"
                 "device still in its step has hung) and the\n"
                 "collective arena's (default 10)"}),
    path_option<&Options::spawn, &SpawnSettings::preflight, &PreflightSettings::device_check>(
        {.name = "device-check",
         .default_text = "trainit-device-check beside the trainit binary, else in "
                         "the library directory it was installed to",
         .help = "the device check --preflight devices runs (default:\n"
                 "trainit-device-check beside trainit, else where\n"
                 "it was installed)"}),
    integer_option<Number::kInteger, 1, 1024, &Options::nproc_per_node>(
        {.name = "nproc-per-node",
         .values = "an integer in 1-1024",
         .default_text = "MA_NUM_GPUS, else PET_NPROC_PER_NODE, else 1",
         .shapes_plan = true,
         .help = "processes per host in the framework modes\n"
                 "(default: MA_NUM_GPUS, PET_NPROC_PER_NODE, else 1)"}),
    integer_option<Number::kPort, 1, 65535, &Options::master_port>(
        {.name = "master-port",
         .values = "a port in 1-65535",
         .default_text = "torchrun: MA_TORCHRUN_MASTER_PORT or 18888; msrun: 8118; pytorch: 29500",
         .shapes_plan = true,
         .help = "host 0's rendezvous port in the framework modes\n"
                 "(default: torchrun MA_TORCHRUN_MASTER_PORT or 18888,\n"
                 "msrun 8118, pytorch 29500)"}),
    seconds_option<&Options::rank_table_timeout>({.name = "rank-table-timeout",
                                                  .help = "how long to wait for a complete rank table\n"
                                                          "(default 1800; then exit 75)"}),
    integer_option<Number::kInteger, kMinLocalDevices, kMaxLocalDevices, &Options::max_local_devices>(
        {.name = "max-local-devices",
         .values = "an integer in 1-4096",
         .shapes_plan = true,
         .help = "devices allowed per host in the rank table, 1-4096\n"
                 "(default 16)"}),
    path_option<&Options::status_file>({.name = "status-file",
                                        .default_text = "/tmp/trainit-status-<host>.json",
                                        .help = "where the job's status JSON is kept\n"
                                                "(default /tmp/trainit-status-<host>.json)"}),
    {.name = "termination-log",
     .value_name = "PATH",
     .values = "an absolute path, or off",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value == "off") {
         o.termination_log.clear();
         return {};
       }
       return set_path(o.termination_log, value);
     },
     .show = [](const Options& o) -> std::optional<std::string> {
       return o.termination_log.empty() ? std::string("off") : o.termination_log;
     },
     .help = "where the job's end is written in one line, if that\n"
             "file exists (default /dev/termination-log: Kubernetes'\n"
             "termination message); off: nowhere"},
    seconds_option<&Options::peers, &PeerSettings::peer_timeout>(
        {.name = "peer-timeout",
         .help = "for every peer name to resolve and every peer's sshd\n"
                 "to answer (default 600; then exit 69)",
         .heading = "Several hosts (MA_NUM_HOSTS > 1) and --mode mpi:"}),
    seconds_option<&Options::peers, &PeerSettings::barrier_timeout>(
        {.name = "barrier-timeout",
         .help = "for every host to check in (default 1800; then\n"
                 "exit 75)"}),
    seconds_option<&Options::peers, &PeerSettings::peer_loss>(
        {.name = "peer-loss",
         .help = "a host not heard from this long is lost: the job\n"
                 "stops everywhere (default 10); one whose connection\n"
                 "closes is lost unless it reconnects within 1 s"}),
    integer_option<Number::kPort, 1, 65535, &Options::control_port>(
        {.name = "control-port",
         .values = "a port in 1-65535",
         .shapes_plan = true,
         .help = "host 0's control channel (default 36660)"}),
    path_option<&Options::peers, &PeerSettings::job_secret_file>(
        {.name = "job-secret-file",
         .default_text = "none: the secret is TRAINIT_JOB_SECRET's value",
         .help = "the hosts' shared secret (else TRAINIT_JOB_SECRET)"}),
    path_option<&Options::ssh_authorized_keys>({.name = "ssh-authorized-keys",
                                                .default_text = "$HOME/.ssh/authorized_keys",
                                                .shapes_plan = true,
                                                .help = "the keys the job's sshd accepts (mpi; default\n"
                                                        "$HOME/.ssh/authorized_keys)"}),
    path_option<&Options::ssh_identity>({.name = "ssh-identity",
                                         .default_text = "ssh's own (~/.ssh/id_*)",
                                         .shapes_plan = true,
                                         .help = "the key mpirun's ssh offers (mpi; default ssh's)"}),
    path_option<&Options::private_dir>(
        {.name = "private-dir",
         .default_text = "/tmp/trainit-<MA_VJ_NAME> (torchrun without it: /tmp/trainit-job)",
         .shapes_plan = true,
         .help = "trainit's own files for the job (mpi, torchrun;\n"
                 "default /tmp/trainit-<MA_VJ_NAME>)"}),
    {.name = "as-user",
     .value_name = "NAME",
     .values = "a user name",
     .apply = [](Options& o, std::string_view value) -> Result<void> {
       if (value.empty()) {
         return reason("expected a user name");
       }
       o.as_user = std::string(value);
       return {};
     },
     .show = [](const Options& o) { return optional_text(o.as_user); },
     .default_text = "the user running trainit",
     .shapes_plan = true,
     .help = "trainit plan only: plan as trainit running as NAME\n"
             "would (default: the user running it)"},
};
#pragma GCC diagnostic pop

}  // namespace

std::span<const OptionSpec> option_table() noexcept {
  return kOptions;
}

}  // namespace trainit
