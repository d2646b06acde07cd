#include "job/hosts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "base/exit_code.h"
#include "base/redact.h"
#include "os/text.h"

namespace trainit {

Result<std::string> read_job_secret(const std::string& file, const Environment& env, const FileSystem& fs) {
  if (file.empty()) {
    return std::string(env.get("TRAINIT_JOB_SECRET").value_or(""));
  }
  auto text = fs.read_file(file, 4096);
  if (!text) {
    return Error{fmt::format("--job-secret-file: {}", text.error().message), text.error().errnum};
  }
  std::string secret = std::move(*text);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
    secret.pop_back();
  }
  if (secret.empty()) {
    return Error{fmt::format("--job-secret-file: {} is empty", file), EINVAL};
  }
  add_secret(secret);  // never written, as TRAINIT_JOB_SECRET's value is not
  return secret;
}

HostsSettings hosts_settings(const PeerSettings& peers, const PreflightSettings& preflight, const Environment& env) {
  HostsSettings settings;
  settings.peers = peers;
  settings.job_id = std::string(env.get("MA_VJ_NAME").value_or(""));
  settings.device_checks = preflight.devices ? preflight.timeout : Duration{};
  return settings;
}

void HostsPhase::resolve() {
  if (!several()) {
    events_.on_done(State::kResolvePeers, "a single host has no peers");
    return;
  }
  names_ = std::make_unique<PeerNames>(
      loop_, plan_.hosts->peers,
      [this](std::vector<in_addr> addrs) {
        addrs_ = std::move(addrs);
        if (events_.on_resolved()) {
          events_.on_done(State::kResolvePeers,
                          fmt::format("every peer name resolved ({})", count_of(addrs_.size(), "host")));
        }
      },
      settings_.peers.peer_timeout);
}

void HostsPhase::wait_sshds() {
  sshds_ = std::make_unique<PeerSshds>(loop_, addrs_, plan_.sshd ? plan_.sshd->port : 22, [this] {
    events_.on_done(State::kWaitPeers, "every host's sshd takes connections");
  });
  if (sshds_->empty()) {
    events_.on_done(State::kWaitPeers, "no peer to wait for");
  }
}

std::string HostsPhase::peers_timeout_cause(bool resolving) {
  std::vector<std::string> missing = names_ ? names_->missing() : std::vector<std::string>{};
  if (sshds_) {
    for (std::string& sshd : sshds_->unanswered()) {
      missing.push_back(std::move(sshd));
    }
  }
  names_.reset();
  sshds_.reset();
  return fmt::format("{} within {:.0f} s: {}", resolving ? "peer names not resolved" : "peers not answering",
                     seconds(settings_.peers.peer_timeout), fmt::join(missing, ", "));
}

void HostsPhase::meet() {
  if (!several()) {
    events_.on_done(State::kHostBarrier, "a single host needs no barrier");
    return;
  }
  if (link_) {  // a restart: the channel is up, this generation's barrier is new
    events_.check_devices([this] { check_in(); });
    return;
  }
  HostLinkSettings settings;
  settings.host_index = plan_.hosts->index;
  settings.host_count = plan_.hosts->hosts;
  settings.port = plan_.hosts->control_port;
  settings.hosts = addrs_;
  settings.job_id = settings_.job_id;
  settings.secret = settings_.secret;
  settings.peer_loss = settings_.peers.peer_loss;
  settings.barrier_timeout = barrier_timeout();
  HostLinkEvents events = events_.link;
  events.on_go = [this] { events_.on_done(State::kHostBarrier, "every host checked in"); };
  auto link = open_host_link(loop_, settings, std::move(events));
  if (!link) {
    events_.on_failed(exit_code::kOsError, fmt::format("control channel: {}", link.error().message));
    return;
  }
  link_ = std::move(*link);
  // Connected (heartbeats flow): this host checks in once its devices
  // passed, so that no rank starts anywhere before every device did.
  events_.check_devices([this] { check_in(); });
}

void HostsPhase::check_in() {
  link_->check_in();
  events_.on_checked_in();
}

Duration HostsPhase::barrier_timeout() const {
  if (plan_.launch && plan_.launch->rendezvous_timeout) {  // torchrun's --rdzv_conf=timeout=, MSRUN_CLUSTER_TIME_OUT
    return std::chrono::seconds(*plan_.launch->rendezvous_timeout);
  }
  return settings_.peers.barrier_timeout;
}

std::string HostsPhase::barrier_timeout_cause() const {
  return link_ ? link_->barrier_timeout_cause(barrier_timeout()) : "the control channel is not open";
}

void HostsPhase::stop(const StopNotice& notice) {
  if (link_) {
    (void)link_->stop(notice);
  }
}

unsigned HostsPhase::restart(const StopNotice& notice) {
  return link_ ? link_->restart(notice) : 0;
}

void HostsPhase::finish() {
  if (link_) {
    link_->finish();
  }
}

void HostsPhase::when_sent(Duration bound, std::function<void()> sent) {
  if (!link_) {
    sent();
    return;
  }
  sent_ = std::move(sent);
  sent_bound_ = loop_.add_timer(
      Clock::now() + bound,
      [this] {
        last_frames_gone();
        return 0;
      },
      "the control channel's last frames");
  link_->when_sent([this] { last_frames_gone(); });
}

void HostsPhase::last_frames_gone() {
  sent_bound_.reset();
  if (auto sent = std::exchange(sent_, nullptr)) {
    sent();
  }
}

}  // namespace trainit
