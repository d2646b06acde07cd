// The rank table readers' one hash index: keys (device_ids, server_ids,
// pod_names) to the place they were first seen, so that a repeat is found in
// constant time and its message can name both places.
//
// Open addressing over 4-byte slots that point into a list of entries: a
// name costs its entry (its TableText, not a copy) and two to four slots.
// clear() costs what was inserted, not the slots, so one index serves server
// after server whatever the largest of them needed. Internal to the rank
// table readers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "platform/rank_table.h"

namespace trainit::rank_table_internal {

// `Keys` hashes and compares keys: `std::size_t hash(const Key&) const` and
// `bool equal(const Key&, const Key&) const`.
template <typename Key, typename Keys>
class FirstSeen {
 public:
  explicit FirstSeen(Keys keys = Keys{}) : keys_(std::move(keys)) {}

  // The value `key` was first given; nullopt when `key` is new, and then it
  // has `value` from now on.
  std::optional<std::uint32_t> insert(const Key& key, std::uint32_t value) {
    if (2 * (entries_.size() + 1) > slots_.size())
      grow();
    std::uint32_t* slot = find(key);
    if (*slot != 0)
      return entries_[*slot - 1].value;
    entries_.push_back(Entry{key, value});
    *slot = static_cast<std::uint32_t>(entries_.size());
    return std::nullopt;
  }

  // Forgets every key, keeping the memory.
  void clear() {
    for (std::size_t e = 0; e < entries_.size(); ++e)
      *slot_of(e) = 0;
    entries_.clear();
  }

  // Forgets every key, memory included.
  void release() {
    std::vector<Entry>().swap(entries_);
    std::vector<std::uint32_t>().swap(slots_);
  }

 private:
  struct Entry {
    Key key;
    std::uint32_t value;
  };

  [[nodiscard]] std::size_t mask() const { return slots_.size() - 1; }

  // The slot of `key`, or the free one where it goes.
  std::uint32_t* find(const Key& key) {
    for (std::size_t i = keys_.hash(key) & mask();; i = (i + 1) & mask()) {
      if (slots_[i] == 0 || keys_.equal(entries_[slots_[i] - 1].key, key))
        return &slots_[i];
    }
  }

  // Entry `e`'s slot, found on its key's probe path by its number rather than
  // its key: clear() frees slots before it on that path, and a free slot must
  // not end the walk.
  std::uint32_t* slot_of(std::size_t e) {
    for (std::size_t i = keys_.hash(entries_[e].key) & mask();; i = (i + 1) & mask()) {
      if (slots_[i] == e + 1)
        return &slots_[i];
    }
  }

  void grow() {
    slots_.assign(std::max<std::size_t>(16, 2 * slots_.size()), 0);
    for (std::size_t e = 0; e < entries_.size(); ++e)
      *find(entries_[e].key) = static_cast<std::uint32_t>(e + 1);
  }

  Keys keys_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> slots_;  // entry + 1; 0: free
};

// device_ids: Fibonacci hashing spreads the small, dense numbers of a server.
struct DeviceIdKeys {
  [[nodiscard]] std::size_t hash(std::uint64_t id) const { return (id * 0x9e3779b97f4a7c15ULL) >> 20; }
  [[nodiscard]] bool equal(std::uint64_t a, std::uint64_t b) const { return a == b; }
};
using DeviceIdIndex = FirstSeen<std::uint64_t, DeviceIdKeys>;

// Names kept in a table's strings (RankTable::strings), compared as text.
// Keys hold where the names are, not copies: the strings may grow (and move)
// between inserts.
class NameKeys {
 public:
  explicit NameKeys(const std::string* strings) : strings_(strings) {}
  [[nodiscard]] std::size_t hash(TableText name) const { return std::hash<std::string_view>{}(view(name)); }
  [[nodiscard]] bool equal(TableText a, TableText b) const { return view(a) == view(b); }

 private:
  [[nodiscard]] std::string_view view(TableText t) const {
    return std::string_view(*strings_).substr(t.offset, t.size);
  }
  const std::string* strings_;
};
using NameIndex = FirstSeen<TableText, NameKeys>;

}  // namespace trainit::rank_table_internal
