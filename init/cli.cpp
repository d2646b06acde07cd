#include "cli.h"

#include <fmt/format.h>

#include "base/number.h"
#include "proc/signals.h"

namespace trainit {
namespace {

constexpr std::string_view kUsage =
    "Usage: trainit [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "       trainit plan [OPTIONS] -- PROGRAM [ARGS...]\n"
    "Run PROGRAM as the child of a correct init (PID 1): signals forwarded,\n"
    "zombies reaped, the child's exit code returned.\n"
    "\n"
    "Options:\n"
    "  -h, --help        show this help and exit\n"
    "  --version         show the version and exit\n"
    "  -l                show the license and exit\n"
    "  -v                more output (repeat for more; TINI_VERBOSITY sets the start)\n"
    "  -s                register as a child subreaper (done anyway when not PID 1;\n"
    "                    TINI_SUBREAPER)\n"
    "  -p SIGNAL         have trainit receive SIGNAL when its parent dies (e.g. SIGKILL)\n"
    "  -g                send signals to the child's whole process group\n"
    "                    (TINI_KILL_PROCESS_GROUP)\n"
    "  -w                warn each time an orphaned zombie is reaped\n"
    "  -e CODE           exit 0 when the child exits with CODE (0-255; repeatable)\n"
    "  --grace SECONDS   how long processes get between SIGTERM and SIGKILL, when\n"
    "                    trainit is stopped or drains (fractions allowed; default 8)\n"
    "  --stop-delay SECONDS  wait this long before passing on SIGTERM/SIGINT (default 0)\n"
    "  --no-drain        exit as soon as the child exits, as tini does, instead of\n"
    "                    stopping every remaining process first\n"
    "  --forward-only    pass SIGTERM/SIGINT to the child only, as tini does, instead\n"
    "                    of stopping every process with the SIGKILL escalation\n"
    "  --restart POLICY  restart the child: no (default), on-failure, always\n"
    "  --max-restarts N  give up after N restarts in a row (default: no limit)\n"
    "  --ready WHEN      when to send READY=1 to NOTIFY_SOCKET: spawn (default: once\n"
    "                    the child runs) or notify (trainit serves the child its own\n"
    "                    NOTIFY_SOCKET and passes on its READY=1 and STATUS=)\n"
    "\n"
    "Job modes:\n"
    "  --mode MODE       auto (default: ascend when RANK_TABLE_FILE or\n"
    "                    RANK_TABLE_FILE_V_1_0 is set, else exec), exec, ascend\n"
    "  --rank-table-timeout SECONDS  how long to wait for a complete rank table\n"
    "                    (default 1800; then exit 75)\n"
    "  --max-local-devices N  devices allowed per host in the rank table, 1-4096\n"
    "                    (default 16)\n"
    "  --status-file PATH  where the job's status JSON is kept\n"
    "                    (default /tmp/trainit-status-<host>.json)\n"
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

bool parse_int(std::string_view text, int min, int max, int* out) {
  auto value = parse_decimal(text, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max));
  if (value) {
    *out = static_cast<int>(*value);
  }
  return value.has_value();
}

Error usage_error(std::string message) {
  return Error{std::move(message), 0};
}

// Applies the short flag `flag`; `value` is its argument for -p and -e.
Result<void> apply_short(char flag, const char* value, Options& o) {
  switch (flag) {
    case 'h':
      o.action = Action::kHelp;
      return {};
    case 'l':
      o.action = Action::kLicense;
      return {};
    case 'v':
      ++o.verbosity;
      return {};
    case 's':  // tini's: trainit is a subreaper whenever it is not PID 1
      return {};
    case 'g':
      o.kill_process_group = true;
      return {};
    case 'w':
      o.warn_on_reap = true;
      return {};
    case 'p': {
      int signo = signal_from_name(value);
      if (signo == 0) {
        return usage_error(fmt::format("-p: unknown signal '{}'", value));
      }
      o.parent_death_signal = signo;
      return {};
    }
    case 'e': {
      int code;
      if (!parse_int(value, 0, 255, &code)) {
        return usage_error(fmt::format("-e: exit code must be an integer in 0-255, got '{}'", value));
      }
      o.exit_zero.set(static_cast<size_t>(code));
      return {};
    }
    default:
      return usage_error(fmt::format("unknown option '-{}'", flag));
  }
}

// Applies a long option that takes a value.
Result<void> apply_long(std::string_view name, std::string_view value, Options& o) {
  if (name == "grace" || name == "stop-delay" || name == "rank-table-timeout") {
    auto seconds = parse_seconds(value);
    if (!seconds) {
      return usage_error(fmt::format("--{}: expected seconds such as 8 or 0.5, got '{}'", name, value));
    }
    (name == "grace" ? o.grace : name == "stop-delay" ? o.stop_delay : o.rank_table_timeout) = *seconds;
  } else if (name == "mode") {
    if (value == "auto") {
      o.mode = RequestedMode::kAuto;
    } else if (value == "exec") {
      o.mode = RequestedMode::kExec;
    } else if (value == "ascend") {
      o.mode = RequestedMode::kAscend;
    } else {
      return usage_error(fmt::format("--mode: expected auto, exec or ascend, got '{}'", value));
    }
  } else if (name == "max-local-devices") {
    auto n = parse_max_local_devices(value);
    if (!n) {
      return usage_error(fmt::format("--max-local-devices: expected an integer in {}-{}, got '{}'", kMinLocalDevices,
                                     kMaxLocalDevices, value));
    }
    o.max_local_devices = *n;
  } else if (name == "status-file") {
    if (value.empty() || value[0] != '/') {
      return usage_error(fmt::format("--status-file: expected an absolute path, got '{}'", value));
    }
    o.status_file = std::string(value);
  } else if (name == "restart") {
    if (value == "no") {
      o.restart = Restart::kNo;
    } else if (value == "on-failure") {
      o.restart = Restart::kOnFailure;
    } else if (value == "always") {
      o.restart = Restart::kAlways;
    } else {
      return usage_error(fmt::format("--restart: expected no, on-failure or always, got '{}'", value));
    }
  } else if (name == "ready" || name == "mode" || name == "rank-table-timeout" || name == "max-local-devices" ||
             name == "status-file") {
    if (value != "spawn" && value != "notify") {
      return usage_error(fmt::format("--ready: expected spawn or notify, got '{}'", value));
    }
    o.ready = value == "spawn" ? Ready::kSpawn : Ready::kNotify;
  } else if (!parse_int(value, 0, 1'000'000, &o.max_restarts)) {
    return usage_error(fmt::format("--max-restarts: expected an integer in 0-1000000, got '{}'", value));
  }
  return {};
}

Result<void> apply_env(const GetEnv& getenv, Options& o) {
  // TINI_SUBREAPER, like -s, is accepted and needs nothing: trainit is a
  // subreaper whenever it is not PID 1.
  if (getenv("TINI_KILL_PROCESS_GROUP") != nullptr) {
    o.kill_process_group = true;
  }
  if (const char* v = getenv("TINI_VERBOSITY"); v != nullptr && !parse_int(v, 0, 10, &o.verbosity)) {
    return usage_error(fmt::format("TINI_VERBOSITY must be an integer in 0-10, got '{}'", v));
  }
  return {};
}

}  // namespace

std::string_view usage_text() {
  return kUsage;
}
std::string_view license_text() {
  return kLicense;
}
std::string_view version_text() {
  return "trainit version " TRAINIT_VERSION "\n";
}

Result<Options> parse_cli(int argc, const char* const* argv, const GetEnv& getenv) {
  Options o;
  if (auto r = apply_env(getenv, o); !r) {
    return r.error();
  }
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      break;  // the program: everything from here on is its
    }
    if (arg[1] == '-') {
      std::string_view name = arg.substr(2);
      std::string_view value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string_view::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (name == "help" && !has_value) {
        o.action = Action::kHelp;
      } else if (name == "version" && !has_value) {
        o.action = Action::kVersion;
      } else if (name == "no-drain" && !has_value) {
        o.drain = false;
      } else if (name == "forward-only" && !has_value) {
        o.forward_only = true;
      } else if (name == "grace" || name == "stop-delay" || name == "restart" || name == "max-restarts" ||
                 name == "ready" || name == "mode" || name == "rank-table-timeout" || name == "max-local-devices" ||
                 name == "status-file") {
        if (!has_value) {
          if (i + 1 >= argc) {
            return usage_error(fmt::format("--{} needs a value", name));
          }
          value = argv[++i];
        }
        if (auto r = apply_long(name, value, o); !r) {
          return r.error();
        }
      } else {
        return usage_error(fmt::format("unknown option '{}'", arg));
      }
      continue;
    }
    for (size_t k = 1; k < arg.size(); ++k) {
      char flag = arg[k];
      const char* value = nullptr;
      if (flag == 'p' || flag == 'e') {
        if (k + 1 < arg.size()) {
          value = argv[i] + k + 1;
        } else if (i + 1 < argc) {
          value = argv[++i];
        } else {
          return usage_error(fmt::format("-{} needs a value", flag));
        }
        k = arg.size();
      }
      if (auto r = apply_short(flag, value, o); !r) {
        return r.error();
      }
    }
  }
  for (; i < argc; ++i) {
    o.command.emplace_back(argv[i]);
  }
  if (o.action == Action::kRun && o.command.empty()) {
    return usage_error("no program given to run");
  }
  return o;
}

}  // namespace trainit
