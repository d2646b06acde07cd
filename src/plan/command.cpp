#include "plan/command.h"

#include <fmt/format.h>

#include <exception>
#include <utility>

#include "base/exit_code.h"
#include "plan/plan_json.h"
#include "platform/text.h"

namespace trainit {
namespace {

constexpr std::string_view kUsage =
    "usage: trainit plan [--mode ascend|exec|mpi|auto] [--max-local-devices N] [--control-port PORT]\n"
    "                    [--ssh-authorized-keys PATH] [--ssh-identity PATH] [--private-dir PATH]\n"
    "                    [--as-user NAME] [--] COMMAND [ARG...]\n"
    "\n"
    "Prints, as JSON (schema trainit.plan/v1), what trainit would start for COMMAND\n"
    "in this environment, and exits: 0 planned, 64 usage error, 78 refused\n"
    "configuration (the one-line error names the variable, file, key and value).\n"
    "\n"
    "  --mode MODE              ascend: one process per device of this host from the\n"
    "                           rank table; exec: COMMAND once, as given; auto (the\n"
    "                           default): ascend when RANK_TABLE_FILE or\n"
    "                           RANK_TABLE_FILE_V_1_0 is set, exec otherwise;\n"
    "                           mpi: sshd on every host, mpirun COMMAND on host 0\n"
    "  --max-local-devices N    devices one host may have (device_id < N), 1..4096;\n"
    "                           default 16\n"
    "  --control-port PORT      host 0's port for the other hosts; default 36660\n"
    "  --ssh-authorized-keys PATH  the keys sshd accepts (mpi); default\n"
    "                           $HOME/.ssh/authorized_keys\n"
    "  --ssh-identity PATH      the key mpirun's ssh offers (mpi); default ssh's own\n"
    "  --private-dir PATH       trainit's own files for the job (mpi); default\n"
    "                           /tmp/trainit-$MA_VJ_NAME\n"
    "  --as-user NAME           plan as trainit running as NAME would (root: as root);\n"
    "                           default the user running `trainit plan`\n"
    "  -h, --help               this text\n";

Error usage(std::string message) {
  return Error{std::move(message)};
}

}  // namespace

std::string_view plan_usage() noexcept {
  return kUsage;
}

Result<PlanArgs> parse_plan_args(std::span<const std::string> args, const PlanOptions& defaults) {
  PlanArgs parsed;
  parsed.options = defaults;
  std::size_t i = args.empty() ? 0 : 1;  // args[0] is "plan"
  auto value_of = [&](std::string_view option, std::string_view arg) -> Result<std::string> {
    if (arg.size() > option.size() && arg[option.size()] == '=')
      return std::string(arg.substr(option.size() + 1));
    if (i + 1 >= args.size())
      return usage(fmt::format("plan: {} needs a value", option));
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "--mode" || arg.starts_with("--mode=")) {
      auto value = value_of("--mode", arg);
      if (!value)
        return value.error();
      if (*value == "auto") {
        parsed.options.mode = RequestedMode::kAuto;
      } else if (*value == "ascend") {
        parsed.options.mode = RequestedMode::kAscend;
      } else if (*value == "exec") {
        parsed.options.mode = RequestedMode::kExec;
      } else if (*value == "mpi") {
        parsed.options.mode = RequestedMode::kMpi;
      } else {
        return usage(fmt::format("plan: --mode {}: not one of ascend, exec, mpi, auto", quote_for_message(*value)));
      }
      continue;
    }
    if (arg == "--control-port" || arg.starts_with("--control-port=")) {
      auto value = value_of("--control-port", arg);
      if (!value)
        return value.error();
      auto port = parse_decimal(*value);
      if (!port || *port < 1 || *port > 65535)
        return usage(fmt::format("plan: --control-port {}: not a port in 1..65535", quote_for_message(*value)));
      parsed.options.control_port = static_cast<std::uint16_t>(*port);
      continue;
    }
    bool matched = false;
    for (auto [option, target] :
         {std::pair{std::string_view("--ssh-authorized-keys"), &parsed.options.ssh_authorized_keys},
          std::pair{std::string_view("--ssh-identity"), &parsed.options.ssh_identity},
          std::pair{std::string_view("--private-dir"), &parsed.options.private_dir},
          std::pair{std::string_view("--as-user"), &parsed.options.user}}) {
      if (arg != option && !(arg.starts_with(option) && arg.size() > option.size() && arg[option.size()] == '='))
        continue;
      auto value = value_of(option, arg);
      if (!value)
        return value.error();
      if (value->empty())
        return usage(fmt::format("plan: {} needs a value", option));
      *target = std::move(*value);
      if (option == "--as-user")
        parsed.options.is_root = *target == "root";
      matched = true;
      break;
    }
    if (matched)
      continue;
    if (arg == "--max-local-devices" || arg.starts_with("--max-local-devices=")) {
      auto value = value_of("--max-local-devices", arg);
      if (!value)
        return value.error();
      auto n = parse_max_local_devices(*value);
      if (!n) {
        return usage(fmt::format("plan: --max-local-devices {}: not a number in {}..{}", quote_for_message(*value),
                                 kMinLocalDevices, kMaxLocalDevices));
      }
      parsed.options.max_local_devices = *n;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      return usage(fmt::format("plan: unknown option {} (see trainit plan --help)", quote_for_message(arg)));
    }
    break;  // the command starts here
  }
  parsed.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  if (parsed.command.empty())
    return usage("plan: no command given (trainit plan [options] -- COMMAND [ARG...])");
  return parsed;
}

CommandOutput run_plan_command(std::span<const std::string> args, const Environment& env, const FileSystem& fs,
                               const PlanOptions& defaults) {
  CommandOutput result;
  try {
    auto parsed = parse_plan_args(args, defaults);
    if (!parsed) {
      result.exit_code = exit_code::kUsage;
      result.err = fmt::format("trainit: error: {}\n", parsed.error().message);
      return result;
    }
    if (parsed->help) {
      result.out = std::string(kUsage);
      return result;
    }
    PlanInput input;
    input.options = parsed->options;
    input.argv = std::move(parsed->command);
    input.env = env;
    input.fs = &fs;
    auto plan = make_plan(input);
    if (!plan) {
      result.exit_code = exit_code::kConfig;
      result.err = fmt::format("trainit: error: {}\n", one_line(plan.error().message));
      return result;
    }
    result.out = plan_to_json(*plan);
  } catch (const std::exception& e) {
    result = CommandOutput{exit_code::kSoftware, "", fmt::format("trainit: error: plan: {}\n", one_line(e.what()))};
  }
  return result;
}

}  // namespace trainit
