#include "job/host_link.h"

#include <fmt/format.h>

#include <utility>

#include "base/log.h"
#include "net/socket.h"

namespace trainit {

// --- resolve_peers ---------------------------------------------------------

PeerNames::PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done)
    : done_(std::move(done)),
      resolver_(std::make_unique<Resolver>(loop, std::move(names),
                                           [this](const std::vector<Resolved>& r) { on_resolved(r); })) {}

PeerNames::PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done, LookupFn lookup, Backoff backoff)
    : done_(std::move(done)),
      resolver_(std::make_unique<Resolver>(
          loop, std::move(names), [this](const std::vector<Resolved>& r) { on_resolved(r); }, std::move(lookup),
          backoff)) {}

// `resolved` is the callback's own copy: the Resolver may go first.
void PeerNames::on_resolved(const std::vector<Resolved>& resolved) {
  resolver_.reset();
  std::vector<in_addr> addrs;
  addrs.reserve(resolved.size());
  for (const Resolved& peer : resolved) {
    addrs.push_back(peer.addrs.front());
    log_info("host {} is {} ({})", addrs.size() - 1, peer.name, ipv4_string(peer.addrs.front()));
  }
  done_(std::move(addrs));
}

// --- the control channel, either end ---------------------------------------

namespace {

// Logs what only host 0 hears: each host's check-in and its finish.
ControlEvents channel_events(HostLinkEvents& events, std::function<void()> on_finished) {
  ControlEvents channel;
  channel.on_go = std::move(events.on_go);
  channel.on_stop = std::move(events.on_stop);
  channel.on_lost = std::move(events.on_lost);
  channel.on_restart = std::move(events.on_restart);
  channel.on_checked_in = [](unsigned host) { log_info("host {} checked in", host); };
  channel.on_finished = [on_finished = std::move(on_finished)](unsigned host) {
    log_info("host {}: every rank exited 0", host);
    on_finished();
  };
  return channel;
}

ControlConfig control_config(const HostLinkSettings& settings) {
  ControlConfig config;
  config.host_index = settings.host_index;
  config.host_count = settings.host_count;
  config.job_id = settings.job_id;
  config.secret = settings.secret;
  config.peer_loss = settings.peer_loss;
  return config;
}

// Host 0: the job is done everywhere once its own ranks and every other
// host's exited 0, and nothing stopped or restarted it meanwhile; then it
// releases the others.
class ServerLink final : public HostLink {
 public:
  static Result<std::unique_ptr<HostLink>> open(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
    std::unique_ptr<ServerLink> link(new ServerLink(std::move(events.on_job_done)));
    // A platform that names only host 0 (Kubeflow): any address may check
    // in, and only a job secret tells a peer from a stranger.
    std::vector<in_addr> allowed =
        settings.hosts.size() == settings.host_count ? settings.hosts : std::vector<in_addr>{};
    if (allowed.empty() && settings.secret.empty()) {
      log_warning(
          "the platform names only host 0: any address may join the control channel; set "
          "TRAINIT_JOB_SECRET to tell the job's hosts from strangers");
    }
    ServerLink* self = link.get();
    auto on_stop = std::move(events.on_stop);
    events.on_stop = [self, on_stop = std::move(on_stop)](const StopNotice& notice) {
      self->stopped_ = true;
      on_stop(notice);
    };
    auto on_restart = std::move(events.on_restart);
    events.on_restart = [self, on_restart = std::move(on_restart)](unsigned generation, const StopNotice& notice) {
      self->finished_ = false;
      on_restart(generation, notice);
    };
    auto server = ControlServer::listen(loop, settings.port, std::move(allowed), control_config(settings),
                                        channel_events(events, [self] { self->maybe_release(); }));
    if (!server) {
      return server.error();
    }
    link->server_ = std::move(*server);
    return std::unique_ptr<HostLink>(std::move(link));
  }

  void check_in() override {
    finished_ = false;  // a generation of its own
    server_->check_in();
  }
  bool stop(const StopNotice& notice) override {
    stopped_ = true;
    return server_->stop(notice);
  }
  unsigned restart(const StopNotice& notice) override {
    finished_ = false;
    return server_->restart(notice);
  }
  void finish() override {
    finished_ = true;
    maybe_release();
  }
  bool flush(Duration max) override { return server_->flush(max); }
  [[nodiscard]] std::string barrier_timeout_cause(Duration timeout) const override {
    return fmt::format("hosts missing at the barrier after {:.0f} s: {}", seconds(timeout),
                       fmt::join(server_->missing(), ", "));
  }

 private:
  explicit ServerLink(std::function<void(int, const std::string&)> on_job_done)
      : on_job_done_(std::move(on_job_done)) {}

  void maybe_release() {
    if (finished_ && !stopped_ && server_->unfinished().empty()) {
      server_->release(0);
      on_job_done_(0, "every rank of every host exited 0");
    }
  }

  std::function<void(int, const std::string&)> on_job_done_;
  std::unique_ptr<ControlServer> server_;
  bool finished_ = false;  // host 0's own ranks all exited 0, this generation
  bool stopped_ = false;   // the job stops: nothing to release
};

// Hosts 1..H-1: host 0 says when the job is over.
class ClientLink final : public HostLink {
 public:
  static Result<std::unique_ptr<HostLink>> open(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
    auto on_job_done = std::move(events.on_job_done);
    ControlEvents channel = channel_events(events, [] {});
    channel.on_release = [on_job_done = std::move(on_job_done)](int code) {
      on_job_done(code, code == 0 ? std::string("host 0: every host's ranks exited 0")
                                  : fmt::format("host 0: the job ended with {}", code));
    };
    auto client =
        ControlClient::connect(loop, settings.hosts.at(0), settings.port, control_config(settings), std::move(channel));
    if (!client) {
      return client.error();
    }
    return std::unique_ptr<HostLink>(new ClientLink(std::move(*client)));
  }

  void check_in() override { client_->check_in(); }
  bool stop(const StopNotice& notice) override { return client_->stop(notice); }
  unsigned restart(const StopNotice& notice) override { return client_->restart(notice); }
  void finish() override { client_->finish(); }
  bool flush(Duration max) override { return client_->flush(max); }
  [[nodiscard]] std::string barrier_timeout_cause(Duration timeout) const override {
    return fmt::format("host 0 did not open the barrier within {:.0f} s", seconds(timeout));
  }

 private:
  explicit ClientLink(std::unique_ptr<ControlClient> client) : client_(std::move(client)) {}

  std::unique_ptr<ControlClient> client_;
};

}  // namespace

Result<std::unique_ptr<HostLink>> open_host_link(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
  return settings.host_index == 0 ? ServerLink::open(loop, settings, std::move(events))
                                  : ClientLink::open(loop, settings, std::move(events));
}

}  // namespace trainit
