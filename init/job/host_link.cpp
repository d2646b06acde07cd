#include "job/host_link.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <unistd.h>

#include <utility>

#include "base/log.h"
#include "net/socket.h"

namespace trainit {

// --- resolve_peers ---------------------------------------------------------

PeerNames::PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done, Duration timeout)
    : done_(std::move(done)),
      resolver_(std::make_unique<Resolver>(
          loop, std::move(names), [this](const std::vector<Resolved>& r) { on_resolved(r); }, indexed_hosts_lookup(),
          Backoff{})) {
  report_.emplace(loop, "the peers' names to resolve", timeout, [this] { return unresolved(); });
}

PeerNames::PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done, LookupFn lookup, Backoff backoff,
                     Duration timeout, Duration report_every)
    : done_(std::move(done)),
      resolver_(std::make_unique<Resolver>(
          loop, std::move(names), [this](const std::vector<Resolved>& r) { on_resolved(r); }, std::move(lookup),
          backoff)) {
  report_.emplace(
      loop, "the peers' names to resolve", timeout, [this] { return unresolved(); }, report_every);
}

std::string PeerNames::unresolved() const {
  return fmt::format("not resolved yet: {}", fmt::join(missing(), ", "));
}

// `resolved` is the callback's own copy: the Resolver may go first.
void PeerNames::on_resolved(const std::vector<Resolved>& resolved) {
  resolver_.reset();
  report_.reset();
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
  // A host with no rank of its own (mpi's hosts 1..H-1) finishes as it
  // starts: "finished" says no more than that nothing of it still runs.
  channel.on_finished = [on_finished = std::move(on_finished)](unsigned host) {
    log_info("host {} finished: no rank of it runs any more", host);
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

// What both ends share: a wait at the barrier is reported (wait_report.h)
// from check_in() until anything ends it: the barrier opens, the job stops
// or restarts, a host is lost.
class ReportingLink : public HostLink {
 protected:
  ReportingLink(Loop& loop, const HostLinkSettings& settings)
      : loop_(loop), timeout_(settings.barrier_timeout), report_every_(settings.report_every) {}

  void report_barrier(std::string what, WaitReport::PendingFn pending) {
    report_.reset();
    report_.emplace(loop_, std::move(what), timeout_, std::move(pending), report_every_);
  }
  void end_barrier_report() { report_.reset(); }

  // `events`, each of which ends a wait at the barrier ending its report
  // first.
  HostLinkEvents ending_reports(HostLinkEvents events) {
    events.on_go = [this, go = std::move(events.on_go)] {
      end_barrier_report();
      go();
    };
    events.on_stop = [this, stop = std::move(events.on_stop)](const StopNotice& notice) {
      end_barrier_report();
      stop(notice);
    };
    events.on_lost = [this, lost = std::move(events.on_lost)](unsigned host, const std::string& why) {
      end_barrier_report();
      lost(host, why);
    };
    events.on_restart = [this, restart = std::move(events.on_restart)](unsigned generation, const StopNotice& notice) {
      end_barrier_report();
      restart(generation, notice);
    };
    return events;
  }

 private:
  Loop& loop_;
  Duration timeout_;
  Duration report_every_;
  std::optional<WaitReport> report_;
};

// "host 2", "hosts 2, 3".
std::string hosts_text(const std::vector<unsigned>& hosts) {
  return fmt::format("host{} {}", hosts.size() == 1 ? "" : "s", fmt::join(hosts, ", "));
}

// Host 0: the job is done everywhere once its own ranks and every other
// host's exited 0, and nothing stopped or restarted it meanwhile; then it
// releases the others.
class ServerLink final : public ReportingLink {
 public:
  static Result<std::unique_ptr<HostLink>> open(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
    std::unique_ptr<ServerLink> link(new ServerLink(loop, settings, std::move(events.on_job_done)));
    events = link->ending_reports(std::move(events));
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
    report_barrier("every host at the barrier",
                   [this] { return fmt::format("not checked in yet: {}", hosts_text(server_->missing())); });
  }
  bool stop(const StopNotice& notice) override {
    end_barrier_report();
    stopped_ = true;
    return server_->stop(notice);
  }
  unsigned restart(const StopNotice& notice) override {
    end_barrier_report();
    finished_ = false;
    return server_->restart(notice);
  }
  void finish() override {
    end_barrier_report();
    finished_ = true;
    maybe_release();
  }
  void when_sent(std::function<void()> sent) override { server_->when_sent(std::move(sent)); }
  [[nodiscard]] std::string barrier_timeout_cause(Duration timeout) const override {
    return fmt::format("hosts missing at the barrier after {:.0f} s: {}", seconds(timeout),
                       fmt::join(server_->missing(), ", "));
  }

 private:
  ServerLink(Loop& loop, const HostLinkSettings& settings, std::function<void(int, const std::string&)> on_job_done)
      : ReportingLink(loop, settings), on_job_done_(std::move(on_job_done)) {}

  void maybe_release() {
    if (finished_ && !stopped_ && server_->all_finished()) {
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
class ClientLink final : public ReportingLink {
 public:
  static Result<std::unique_ptr<HostLink>> open(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
    // The link exists before its channel: the channel's events end its reports.
    std::unique_ptr<ClientLink> link(new ClientLink(loop, settings));
    events = link->ending_reports(std::move(events));
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
    link->client_ = std::move(*client);
    return std::unique_ptr<HostLink>(std::move(link));
  }

  void check_in() override {
    client_->check_in();
    report_barrier("host 0 to open the barrier", {});
  }
  bool stop(const StopNotice& notice) override {
    end_barrier_report();
    return client_->stop(notice);
  }
  unsigned restart(const StopNotice& notice) override {
    end_barrier_report();
    return client_->restart(notice);
  }
  void finish() override {
    end_barrier_report();
    client_->finish();
  }
  void when_sent(std::function<void()> sent) override { client_->when_sent(std::move(sent)); }
  [[nodiscard]] std::string barrier_timeout_cause(Duration timeout) const override {
    return fmt::format("host 0 did not open the barrier within {:.0f} s", seconds(timeout));
  }

 private:
  ClientLink(Loop& loop, const HostLinkSettings& settings) : ReportingLink(loop, settings) {}

  std::unique_ptr<ControlClient> client_;
};

}  // namespace

Result<std::unique_ptr<HostLink>> open_host_link(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events) {
  return settings.host_index == 0 ? ServerLink::open(loop, settings, std::move(events))
                                  : ClientLink::open(loop, settings, std::move(events));
}

}  // namespace trainit
