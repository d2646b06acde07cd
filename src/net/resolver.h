// Resolving the job's peer names, without ever blocking the loop.
//
// Peer names appear in DNS as the platform starts containers, not all at
// once: a Resolver asks again for the names still missing, with backoff, until
// every name has an address. It has no deadline of its own: the caller owns
// the timeout and destroys the Resolver when it passes (missing() names the
// culprits).
//
// The lookups run on one worker thread, one round at a time (a round asks for
// every name still missing, in order); a round's results come back to the loop
// through an eventfd. Between rounds a loop timer waits 50 ms, doubling up to
// 2 s. A round that cannot start (no thread, no eventfd) counts as a round
// that found nothing.
//
// The default lookup is lookup_ipv4(): what the libc's "hosts: files dns"
// does, minus NSS. glibc's getaddrinfo() in a static binary loads the NSS
// modules the image's nsswitch.conf names (mdns4_minimal, resolve, ...) from
// the image's own glibc, whatever its version: not something PID 1 should
// do. lookup_ipv4() reads /etc/hosts itself and asks DNS through the
// resolver library (res_nsearch, which needs no NSS).
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

// A name and the IPv4 addresses it resolved to (never empty once resolved).
struct Resolved {
  std::string name;
  std::vector<in_addr> addrs;
};

// The wait between rounds: `first`, doubling up to `max`.
struct Backoff {
  Duration first = std::chrono::milliseconds(50);
  Duration max = std::chrono::seconds(2);
};

// One blocking lookup; an empty result means "not (yet) resolvable". Called on
// the worker thread, and possibly after the Resolver is gone (a lookup under
// way when it was destroyed): it must not refer to anything that may die
// first. An exception counts as an empty result.
using LookupFn = std::function<std::vector<in_addr>(const std::string& name)>;

// `name`'s IPv4 addresses, as getaddrinfo(AF_INET, SOCK_STREAM) with "hosts:
// files dns" finds them: a dotted address stands for itself; then every
// /etc/hosts line that names it (case-insensitively), in file order; else the
// A records DNS gives, with /etc/resolv.conf's search list and ndots. Blocks
// for as long as DNS takes (resolv.conf's timeout and attempts). Empty when
// not found or DNS failed.
[[nodiscard]] std::vector<in_addr> lookup_ipv4(const std::string& name);
// The addresses an /etc/hosts text gives `name`, in file order, without
// duplicates. IPv6 lines are skipped.
[[nodiscard]] std::vector<in_addr> hosts_file_lookup(std::string_view text, std::string_view name);
// lookup_ipv4()'s answers with /etc/hosts parsed once for every name (and
// again when the file changes), not once for each: a job of H hosts looks up
// H names on every host at once (src/net/hosts_index.cpp). Thread-safe.
[[nodiscard]] LookupFn indexed_hosts_lookup();

class Resolver {
 public:
  // Called once, from the loop, when every name has an address: the names
  // in the order given (duplicates included). It may destroy the Resolver.
  using DoneFn = std::function<void(std::vector<Resolved>)>;

  // Starts the first round now, with lookup_ipv4().
  Resolver(Loop& loop, std::vector<std::string> names, DoneFn done, Backoff backoff = {});
  // The same with another lookup (tests).
  Resolver(Loop& loop, std::vector<std::string> names, DoneFn done, LookupFn lookup, Backoff backoff = {});
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;
  // Never waits for the worker: a lookup under way finishes on its own (or
  // stops at the next name) and its results are dropped. No callback after.
  ~Resolver();

  // Names without an address yet, in the order given.
  [[nodiscard]] std::vector<std::string> missing() const;
  // Rounds started so far.
  [[nodiscard]] unsigned rounds() const noexcept { return rounds_; }

 private:
  struct Round;

  // The worker thread's body: one round of lookups.
  static void work(Round& round);
  void start_round();
  int on_round_done();
  void wait_and_retry();

  Loop& loop_;
  std::vector<std::string> names_;
  std::vector<std::vector<in_addr>> addrs_;  // by name; empty: missing
  DoneFn done_;
  std::shared_ptr<const LookupFn> lookup_;  // shared with the worker
  Backoff backoff_;
  Duration delay_;
  unsigned rounds_ = 0;
  std::shared_ptr<Round> round_;  // the round under way, shared with the worker
  SourceHandle io_;
  SourceHandle timer_;
};

}  // namespace trainit
