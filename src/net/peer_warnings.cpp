#include "net/peer_warnings.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"
#include "net/socket.h"

namespace trainit::net {

void PeerWarnings::warn(in_addr address, std::string_view line, std::string_view verb, std::string_view why,
                        Clock::time_point now) {
  auto entry = std::find_if(entries_.begin(), entries_.end(),
                            [address](const Entry& e) { return !e.others && same_ipv4(e.address, address); });
  if (entry == entries_.end()) {
    entry = std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.others; });
    const bool full = entries_.size() - (entry != entries_.end() ? 1 : 0) >= max_addresses_;
    if (entry == entries_.end() || !full) {
      Entry fresh;
      fresh.address = address;
      fresh.others = full;
      fresh.since = now;
      entries_.push_back(std::move(fresh));
      log_warning("{}", line);
      return;
    }
  }
  if (now - entry->since >= interval_) {  // an interval over that tick() has not seen yet
    const bool counted = entry->count > 0;
    summarise(*entry, now);
    if (!counted) {
      log_warning("{}", line);
      return;
    }
  }
  if (entry->count > 0 && entry->verb != verb && entry->verb.find(" or ") == std::string::npos) {
    entry->verb = "refused or closed";
  } else if (entry->count == 0) {
    entry->verb = std::string(verb);
  }
  entry->one_why = entry->count == 0 || (entry->one_why && entry->why == why);
  entry->why = std::string(why);
  ++entry->count;
}

void PeerWarnings::summarise(Entry& entry, Clock::time_point now) {
  if (entry.count > 0) {
    const double seconds = std::chrono::duration<double>(now - entry.since).count();
    const std::string from = entry.others ? std::string("other addresses") : ipv4_string(entry.address);
    log_warning("control: {} {} more connection{} from {} in the last {:.0f} s{} {}", entry.verb, entry.count,
                entry.count == 1 ? "" : "s", from, std::max(1.0, std::ceil(seconds)),
                entry.one_why ? ":" : "; the last:", entry.why);
  }
  entry.since = now;
  entry.count = 0;
  entry.one_why = true;
}

void PeerWarnings::tick(Clock::time_point now) {
  std::erase_if(entries_, [&](Entry& entry) {
    if (now - entry.since < interval_) {
      return false;
    }
    const bool counted = entry.count > 0;
    summarise(entry, now);
    return !counted;
  });
}

void PeerWarnings::flush(Clock::time_point now) {
  for (Entry& entry : entries_) {
    summarise(entry, now);
  }
}

}  // namespace trainit::net
