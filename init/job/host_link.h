// The host link: how a host of a multi-host job finds the others and talks
// to them (the resolve_peers and host_barrier states).
//
// PeerNames resolves every host's platform name to its address. HostLink is
// the control channel as the job sees it, whichever end this host holds:
// host 0 serves it (net::ControlServer), every other host connects to it
// (net::ControlClient); open_host_link() picks the end from the host's
// index, so the job never asks which it is. The verbs are the channel's
// (net/control.h): check in at the barrier, stop the job everywhere, start
// it again, say this host's ranks are done; the events are what the job
// hears back, the same on every host.
//
// Waiting says so (wait_report.h): every 30 s until the names resolve, which
// are still missing; at the barrier, host 0 which hosts have not checked in,
// the others that host 0 has not opened it.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "job/wait_report.h"
#include "loop/loop.h"
#include "net/control.h"
#include "net/resolver.h"

namespace trainit {

// resolve_peers: every host's name to one address, host i's at index i.
class PeerNames {
 public:
  using DoneFn = std::function<void(std::vector<in_addr> addrs)>;

  // Starts resolving now; `done` runs from the loop once every name has an
  // address (each logged as "host I is NAME (ADDR)"). It may destroy this.
  // `timeout`: the runner's deadline, for the reports (zero: none to tell).
  PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done, Duration timeout = {});
  // The same with another lookup and report period (tests).
  PeerNames(Loop& loop, std::vector<std::string> names, DoneFn done, LookupFn lookup, Backoff backoff,
            Duration timeout = {}, Duration report_every = WaitReport::kPeriod);

  // Names without an address yet, in host order.
  [[nodiscard]] std::vector<std::string> missing() const { return resolver_ ? resolver_->missing() : missing_; }

 private:
  void on_resolved(const std::vector<Resolved>& resolved);
  [[nodiscard]] std::string unresolved() const;

  DoneFn done_;
  std::unique_ptr<Resolver> resolver_;
  std::vector<std::string> missing_;  // once the resolver is gone: none
  std::optional<WaitReport> report_;  // until every name resolved
};

// What the channel tells this host's job.
struct HostLinkEvents {
  std::function<void()> on_go;                     // every host checked in: the barrier opens
  std::function<void(const StopNotice&)> on_stop;  // another host stopped the job
  // That host is gone: silent for --peer-loss, or its connection closed and
  // not back within the reconnect grace. `why` says which, in words.
  std::function<void(unsigned host, const std::string& why)> on_lost;
  // Another host's rank failed: the job starts again as `generation`.
  std::function<void(unsigned generation, const StopNotice&)> on_restart;
  // The job is over everywhere: 0 when every rank of every host exited 0,
  // else the code host 0's job ended with. `why` says so in words.
  std::function<void(int code, const std::string& why)> on_job_done;
};

struct HostLinkSettings {
  unsigned host_index = 0;
  unsigned host_count = 1;
  uint16_t port = 0;
  // Host i's address; where the platform names only host 0, just its.
  std::vector<in_addr> hosts;
  std::string job_id;  // MA_VJ_NAME: every host's must match
  std::string secret;  // empty: none
  Duration peer_loss{};
  // The barrier's deadline and how often a wait there is reported.
  Duration barrier_timeout{};
  Duration report_every = WaitReport::kPeriod;
};

class HostLink {
 public:
  HostLink() = default;
  HostLink(const HostLink&) = delete;
  HostLink& operator=(const HostLink&) = delete;
  virtual ~HostLink() = default;

  // This host is at the barrier (again, for a restart's generation).
  virtual void check_in() = 0;
  // Stops the job on every host. False when a stop came first.
  virtual bool stop(const StopNotice& notice) = 0;
  // This host's rank failed: the job starts again everywhere. The new
  // generation (1, 2, ...), or 0 when a stop came first.
  virtual unsigned restart(const StopNotice& notice) = 0;
  // Every rank of this host exited 0. on_job_done follows once every
  // host's have.
  virtual void finish() = 0;
  // `sent` is called once, from the loop (or now), when nothing queued for
  // the other hosts waits any more: before the process exits. Nothing waits
  // for it; the caller bounds it with a timer.
  virtual void when_sent(std::function<void()> sent) = 0;
  // Why the barrier did not open within `timeout`, in one line.
  [[nodiscard]] virtual std::string barrier_timeout_cause(Duration timeout) const = 0;
};

// Host 0 listens, any other host connects to host 0's address. The error
// says what could not be opened.
Result<std::unique_ptr<HostLink>> open_host_link(Loop& loop, const HostLinkSettings& settings, HostLinkEvents events);

}  // namespace trainit
