// Warnings about what peers did on the control port (strangers, mostly),
// kept from flooding the log: at most one line per address per interval.
//
// The first warning about an address is logged at once. Those that follow
// within the interval are only counted; when the interval is over, one
// summary line gives their number ("refused 14921 more connections from
// 10.0.0.9 in the last 10 s: not one of the job's hosts") and a new interval
// begins, counted the same way; an interval with nothing to count forgets the
// address. The table of addresses is bounded: past `max_addresses`, the
// others share one entry ("from other addresses"), so that a stranger with
// many addresses costs a bounded amount of memory and lines.
//
// Internal to net/control_server.cpp. Time is passed in, for the tests.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"

namespace trainit::net {

class PeerWarnings {
 public:
  PeerWarnings(Duration interval, size_t max_addresses) : interval_(interval), max_addresses_(max_addresses) {}
  PeerWarnings(const PeerWarnings&) = delete;
  PeerWarnings& operator=(const PeerWarnings&) = delete;
  ~PeerWarnings() { flush(Clock::now()); }

  // A warning about a connection from `address`: `line` (the whole text,
  // "control: refused a connection from 10.0.0.9: not one of the job's
  // hosts") when it is the first of its interval, else counted. `verb` and
  // `why` are what a summary says of it ("refused", "not one of the job's
  // hosts").
  void warn(in_addr address, std::string_view line, std::string_view verb, std::string_view why, Clock::time_point now);
  // Logs the summaries of the intervals that are over and forgets the
  // addresses with nothing counted.
  void tick(Clock::time_point now);
  // Logs every summary due, over or not (the channel is closing).
  void flush(Clock::time_point now);

  // Addresses in the table (the shared entry counts as one).
  [[nodiscard]] size_t addresses() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    in_addr address{};
    bool others = false;  // the shared entry of the addresses past the table
    Clock::time_point since{};
    uint64_t count = 0;  // counted, not logged, this interval
    std::string verb;    // of what was counted: "refused", "closed" or both
    std::string why;     // the last reason counted
    bool one_why = true;
  };

  void summarise(Entry& entry, Clock::time_point now);

  Duration interval_;
  size_t max_addresses_;
  std::vector<Entry> entries_;
};

}  // namespace trainit::net
