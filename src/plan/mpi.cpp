#include "plan/mpi.h"

#include <fmt/core.h>

#include <algorithm>

#include "os/path.h"
#include "os/text.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

constexpr std::string_view kSshdPath = "/usr/sbin/sshd";
// sshd started as root refuses to run without its privilege-separation
// directory; Debian's and Ubuntu's is /run/sshd, which only their service
// script creates (a container never runs it). Elsewhere it is /var/empty,
// which the package ships: creating /run/sshd there does no harm.
constexpr std::string_view kSshdPrivsepDir = "/run/sshd";
constexpr std::string_view kHostKeyName = "ssh_host_ed25519_key";
constexpr std::string_view kPrivateDirPrefix = "/tmp/trainit-";
constexpr std::size_t kMaxPathBytes = 1024;

constexpr std::string_view kForwardedPrefixes[] = {"MA_", "SHARED_", "S3_", "VC_WORKER_", "SCC", "CRED"};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A path that may stand, unquoted, in sshd_config, ssh_config and mpirun's
// plm_rsh_args (which mpirun splits on spaces) and -tune list (split on
// commas): absolute, in normal form, of A-Z a-z 0-9 / . _ - + @ only (no
// space, quote, comma, '%' token or '~').
bool is_plain_path(std::string_view path) {
  auto plain = [](char c) { return is_name_char(c) || std::string_view("/._-+@").find(c) != std::string_view::npos; };
  return !path.empty() && path.size() <= kMaxPathBytes && is_absolute_path(path) && normalize_path(path) == path &&
         std::all_of(path.begin(), path.end(), plain);
}

// `what`: an option ("--private-dir") or a variable ("HOME").
Error not_plain(std::string_view what, std::string_view path) {
  return Error{
      fmt::format("{}{}{}: not an absolute path in normal form of A-Z a-z 0-9 / . _ - + @ (it is written "
                  "unquoted into sshd and ssh configs and mpirun's arguments)",
                  what, what.starts_with("--") ? " " : "=", quote_for_message(path))};
}

// An address as resolve_peers reports one: an IPv4 or IPv6 literal.
bool is_address(std::string_view text) {
  auto hex_or_sep = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.' || c == ':';
  };
  return !text.empty() && text.size() <= 45 && std::all_of(text.begin(), text.end(), hex_or_sep);
}

// The MPI-specific inputs, each validated, before anything is planned.
struct MpiInputs {
  Cluster geometry;  // ModelArts' (job_geometry())
  std::uint16_t sshd_port = kDefaultSshdPort;
  unsigned slots = 1;
  std::string interfaces;
  std::string private_dir;
  std::string authorized_keys;  // several hosts only
  std::string identity;
  std::string user;  // AllowUsers; empty: none
  std::string job_id;
};

Result<MpiInputs> read_inputs(const PlanInput& input) {
  const Environment& env = input.env;
  const PlanOptions& options = input.options;
  MpiInputs in;
  auto geometry = job_geometry(env);
  if (!geometry)
    return geometry.error();
  in.geometry = std::move(*geometry);
  const bool several = in.geometry.hosts > 1;

  auto port = env.sshd_port();
  if (!port)
    return port.error();
  in.sshd_port = *port;
  if (several && in.sshd_port == options.control_port) {
    return Error{fmt::format("MY_SSHD_PORT={}: the same port as the hosts' control channel (--control-port {})",
                             in.sshd_port, options.control_port)};
  }
  auto slots = env.mpi_slots();
  if (!slots)
    return slots.error();
  in.slots = slots->value_or(in.geometry.nproc.value_or(1));
  auto interfaces = env.mpi_interfaces();
  if (!interfaces)
    return interfaces.error();
  in.interfaces = std::move(*interfaces);
  auto job_id = env.job_id();
  if (!job_id)
    return job_id.error();
  in.job_id = std::move(*job_id);

  in.private_dir =
      options.private_dir.empty() ? std::string(kPrivateDirPrefix) + in.geometry.job_name : options.private_dir;
  if (!is_plain_path(in.private_dir))
    return not_plain("--private-dir", in.private_dir);
  if (!options.ssh_identity.empty() && !is_plain_path(options.ssh_identity))
    return not_plain("--ssh-identity", options.ssh_identity);
  in.identity = options.ssh_identity;

  in.user = options.user.empty() && options.is_root ? std::string("root") : options.user;
  if (!in.user.empty() && !is_safe_name(in.user)) {
    return Error{
        fmt::format("user {}: not a user name sshd's AllowUsers can hold (1-200 of A-Z a-z 0-9 . _ -, "
                    "starting with a letter or digit)",
                    quote_for_message(in.user))};
  }

  if (several) {
    if (!options.ssh_authorized_keys.empty()) {
      in.authorized_keys = options.ssh_authorized_keys;
      if (!is_plain_path(in.authorized_keys))
        return not_plain("--ssh-authorized-keys", in.authorized_keys);
    } else if (input.privileges && !input.privileges->home.empty()) {
      // --user: mpirun's ssh logs in as that user, with that user's keys.
      in.authorized_keys = join_path(input.privileges->home, ".ssh/authorized_keys");
      if (!is_plain_path(in.authorized_keys))
        return not_plain("the job user's home", input.privileges->home);
    } else {
      auto home = env.home();
      if (!home)
        return home.error();
      if (!*home) {
        return Error{
            "HOME is not set: sshd's authorized keys are $HOME/.ssh/authorized_keys unless --ssh-authorized-keys "
            "names them"};
      }
      in.authorized_keys = join_path(**home, ".ssh/authorized_keys");
      if (!is_plain_path(in.authorized_keys))
        return not_plain("HOME", **home);
    }
  }

  if (!input.peer_addresses.empty()) {
    if (input.peer_addresses.size() != in.geometry.hosts) {
      return Error{
          fmt::format("{} peer addresses for a job of {} hosts", input.peer_addresses.size(), in.geometry.hosts)};
    }
    for (std::size_t i = 0; i < input.peer_addresses.size(); ++i) {
      if (!is_address(input.peer_addresses[i])) {
        return Error{fmt::format("peer address {} of host {}: not an IPv4 or IPv6 address",
                                 quote_for_message(input.peer_addresses[i]), i)};
      }
    }
  }
  return in;
}

std::string sshd_config(const MpiInputs& in, const std::string& host_key, bool is_root) {
  std::string out = fmt::format(
      "# sshd of job {}, host {} of {}: written by trainit for this job only.\n"
      "Port {}\n"
      "ListenAddress 0.0.0.0\n"
      "HostKey {}\n"
      "PidFile none\n"
      "UsePAM no\n"
      "PubkeyAuthentication yes\n"
      "AuthorizedKeysFile {}\n"
      "PasswordAuthentication no\n"
      "KbdInteractiveAuthentication no\n"
      "PermitEmptyPasswords no\n"
      "HostbasedAuthentication no\n"
      "PermitRootLogin {}\n",
      in.geometry.job_name, in.geometry.index, in.geometry.hosts, in.sshd_port, host_key, in.authorized_keys,
      is_root ? "prohibit-password" : "no");
  if (!in.user.empty())
    out += fmt::format("AllowUsers {}\n", in.user);
  out +=
      "StrictModes yes\n"
      "PermitUserEnvironment no\n"
      "AllowAgentForwarding no\n"
      "AllowTcpForwarding no\n"
      "X11Forwarding no\n"
      "PermitTunnel no\n"
      "PrintMotd no\n";
  return out;
}

SshdPlan plan_sshd(const MpiInputs& in, const PlanInput& input, const std::string& log_dir) {
  SshdPlan sshd;
  sshd.sshd_path = std::string(kSshdPath);
  sshd.config_path = join_path(in.private_dir, "sshd_config");
  sshd.port = in.sshd_port;
  sshd.host_key_dir = in.private_dir;
  sshd.host_keys = {join_path(in.private_dir, kHostKeyName)};
  sshd.authorized_keys = in.authorized_keys;
  sshd.user = in.user;
  sshd.config = sshd_config(in, sshd.host_keys[0], input.options.is_root);

  ProcessSpec& p = sshd.process;
  p.name = "sshd";
  p.argv = {sshd.sshd_path, "-D", "-e", "-f", sshd.config_path};
  p.env = child_base_env(input.env);
  p.group = GroupPolicy::kSession;
  p.output = OutputPolicy::kLogAndConsole;
  p.log_file = join_path(log_dir, fmt::format("{}-sshd-{}.txt", in.job_id, in.geometry.index));
  p.console_prefix = "[sshd] ";
  return sshd;
}

ProcessSpec plan_mpirun(const MpiInputs& in, const PlanInput& input, const MpiPlan& mpi, const std::string& log_dir) {
  const unsigned hosts = in.geometry.hosts;
  ProcessSpec p;
  p.name = "mpirun";
  p.argv = {"mpirun", "-np", std::to_string(static_cast<unsigned long long>(hosts) * in.slots), "-hostfile",
            mpi.hostfile_path};
  if (hosts > 1) {
    p.argv.insert(p.argv.end(),
                  {"-mca", "plm_rsh_args", fmt::format("-p {} -F {}", in.sshd_port, mpi.ssh_config_path)});
  }
  p.argv.insert(p.argv.end(), {"-tune", mpi.tune_path, "-bind-to", "none", "-map-by", "slot", "-x", "NCCL_DEBUG=INFO",
                               "-x", "NCCL_SOCKET_IFNAME=" + in.interfaces, "-x", "NCCL_SOCKET_FAMILY=AF_INET", "-x",
                               "HOROVOD_MPI_THREADS_DISABLE=1"});
  // Forwarded only when set: Open MPI warns about an -x of an unset variable
  // on every run.
  if (input.env.get("LD_LIBRARY_PATH")) {
    p.argv.insert(p.argv.end(), {"-x", "LD_LIBRARY_PATH"});
  }
  p.argv.insert(p.argv.end(),
                {"-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "plm_rsh_no_tree_spawn", "true"});
  if (input.options.is_root && (input.options.user.empty() || input.options.user == "root"))
    p.argv.emplace_back("--allow-run-as-root");  // only where mpirun runs as root
  p.argv.insert(p.argv.end(), input.argv.begin(), input.argv.end());
  p.env = child_base_env(input.env);
  p.group = GroupPolicy::kSession;
  p.output = OutputPolicy::kLogAndConsole;
  p.log_file = join_path(log_dir, fmt::format("{}-mpirun.txt", in.job_id));
  p.console_prefix = "[mpirun] ";
  return p;
}

std::vector<State> mpi_states(unsigned hosts, bool host0) {
  if (hosts == 1)
    return {State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit};
  if (host0) {
    return {State::kStartSshd, State::kResolvePeers, State::kWaitPeers, State::kHostBarrier, State::kSpawn,
            State::kRunning,   State::kStopping,     State::kReaping,   State::kExit};
  }
  return {State::kStartSshd, State::kResolvePeers, State::kHostBarrier, State::kRunning,
          State::kStopping,  State::kReaping,      State::kExit};
}

}  // namespace

bool is_forwarded_to_ranks(std::string_view name) noexcept {
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char))
    return false;
  if (name == "PATH")
    return true;
  return std::any_of(std::begin(kForwardedPrefixes), std::end(kForwardedPrefixes),
                     [&](std::string_view prefix) { return name.starts_with(prefix); });
}

std::string render_hostfile(const std::vector<std::string>& hosts, unsigned slots) {
  std::string out;
  for (const std::string& host : hosts)
    out += fmt::format("{} slots={}\n", host, slots);
  return out;
}

std::string render_tune_file(const std::vector<EnvVar>& env) {
  std::string out;
  for (const EnvVar& var : env) {
    if (!var.value.empty() && is_forwarded_to_ranks(var.name))
      out += fmt::format("-x {}\n", var.name);
  }
  return out;
}

std::string render_ssh_config(const std::vector<std::string>& names, const std::vector<std::string>& addresses,
                              std::uint16_t port, std::string_view identity) {
  std::string out = "# How mpirun's ssh reaches this job's hosts: written by trainit for this job only.\n";
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += "Host " + names[i];
    if (i < addresses.size())
      out += " " + addresses[i];
    out += fmt::format(
        "\n  Port {}\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        "  BatchMode yes\n",
        port);
    if (!identity.empty())
      out += fmt::format("  IdentityFile {}\n  IdentitiesOnly yes\n", identity);
  }
  return out;
}

std::vector<std::string> host_key_generation_argv(std::string_view key_path) {
  return {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "trainit host key", "-f", std::string(key_path)};
}

Result<Plan> plan_mpi(const PlanInput& input) {
  auto inputs = read_inputs(input);
  if (!inputs)
    return inputs.error();
  const MpiInputs& in = *inputs;
  const Cluster& geometry = in.geometry;
  const bool several = geometry.hosts > 1;
  const bool host0 = geometry.index == 0;

  auto mount = input.env.mount_path();
  if (!mount)
    return mount.error();
  const std::string log_dir = job_log_dir(*mount, *input.fs);

  Plan plan;
  plan.mode = Mode::kMpi;
  plan.replan_with_addresses = several;
  plan.states = mpi_states(geometry.hosts, host0);
  plan.signals = SignalPolicy::kStop;
  plan.hosts = HostsPlan{geometry.hosts, geometry.index, geometry.peers, input.options.control_port};
  plan.private_dir = in.private_dir;
  if (several && input.options.is_root)
    plan.dirs.emplace_back(kSshdPrivsepDir);
  plan.dirs.push_back(log_dir);
  if (several)
    plan.sshd = plan_sshd(in, input, log_dir);

  MpiPlan mpi;
  mpi.slots = in.slots;
  mpi.host0 = host0;
  // mpirun hands -tune's path to every orted and rank it starts, and each
  // opens it on its own host: the file is at that path on every host (else
  // each prints "Unable to locate the variable file").
  const std::string tune_path = join_path(in.private_dir, "mpi_tune");
  plan.files.push_back(FileSpec{tune_path, render_tune_file(child_base_env(input.env)), 0600});
  if (host0) {
    mpi.addresses = several && !input.peer_addresses.empty();
    mpi.hostfile_path = join_path(in.private_dir, "hostfile");
    mpi.tune_path = tune_path;
    std::vector<std::string> hostfile_hosts = !several        ? std::vector<std::string>{"localhost"}
                                              : mpi.addresses ? input.peer_addresses
                                                              : geometry.peers;
    plan.files.push_back(FileSpec{mpi.hostfile_path, render_hostfile(hostfile_hosts, in.slots), 0600});
    if (several) {
      mpi.ssh_config_path = join_path(in.private_dir, "ssh_config");
      static const std::vector<std::string> kNoAddresses;
      std::string config = render_ssh_config(geometry.peers, mpi.addresses ? input.peer_addresses : kNoAddresses,
                                             in.sshd_port, in.identity);
      plan.files.push_back(FileSpec{mpi.ssh_config_path, std::move(config), 0600});
    }
    plan.processes.push_back(plan_mpirun(in, input, mpi, log_dir));
  }
  plan.mpi = std::move(mpi);
  return plan;
}

}  // namespace trainit
