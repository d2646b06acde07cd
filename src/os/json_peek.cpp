// The top-level peeks of os/json.h: one key of the top-level object
// looked at without building the document (what a rank table says it is, a
// key given twice), as SAX readers that stop as soon as they know.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "os/json.h"

namespace trainit {
namespace {

// Looks for one key of the top-level object and stops at its value.
class TopLevelPeek {
 public:
  TopLevelPeek(std::string_view key, unsigned max_depth) : key_(key), max_depth_(max_depth) {}

  bool null() { return value(); }
  bool boolean(bool /*v*/) { return value(); }
  bool number_integer(Json::number_integer_t /*v*/) { return value(); }
  bool number_unsigned(Json::number_unsigned_t /*v*/) { return value(); }
  bool number_float(Json::number_float_t /*v*/, const Json::string_t& /*text*/) { return value(); }
  bool string(Json::string_t& v) {
    if (depth_ == 1 && at_key_) {
      found_ = std::move(v);
      return false;
    }
    return value();
  }
  bool binary(Json::binary_t& /*v*/) { return false; }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return --depth_ > 0; }
  bool end_array() { return --depth_ > 0; }
  bool key(Json::string_t& k) {
    if (depth_ == 1)
      at_key_ = k == key_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) {
    return false;
  }

  [[nodiscard]] std::optional<std::string>& found() { return found_; }

 private:
  // A value that is not the string looked for: the top level itself, or the
  // key's value, ends the look.
  bool value() const { return depth_ > 0 && !(depth_ == 1 && at_key_); }

  bool open(bool object) {
    if ((depth_ == 0 && !object) || (depth_ == 1 && at_key_) || depth_ >= max_depth_)
      return false;
    ++depth_;
    return true;
  }

  std::string_view key_;
  unsigned max_depth_;
  unsigned depth_ = 0;
  bool at_key_ = false;
  std::optional<std::string> found_;
};

// Counts one key of the top-level object, up to its second time; reads
// nothing else but the structure around it.
class TopLevelKeyCount {
 public:
  TopLevelKeyCount(std::string_view key, unsigned max_depth) : key_(key), max_depth_(max_depth) {}

  bool null() { return depth_ > 0; }
  bool boolean(bool /*v*/) { return depth_ > 0; }
  bool number_integer(Json::number_integer_t /*v*/) { return depth_ > 0; }
  bool number_unsigned(Json::number_unsigned_t /*v*/) { return depth_ > 0; }
  bool number_float(Json::number_float_t /*v*/, const Json::string_t& /*text*/) { return depth_ > 0; }
  bool string(Json::string_t& /*v*/) { return depth_ > 0; }
  bool binary(Json::binary_t& /*v*/) { return false; }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return --depth_ > 0; }
  bool end_array() { return --depth_ > 0; }
  bool key(Json::string_t& k) {
    if (depth_ == 1 && k == key_)
      ++count_;
    return count_ < 2;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) {
    return false;
  }

  [[nodiscard]] bool repeated() const { return count_ >= 2; }

 private:
  bool open(bool object) {
    if ((depth_ == 0 && !object) || depth_ >= max_depth_)
      return false;
    ++depth_;
    return true;
  }

  std::string_view key_;
  unsigned max_depth_;
  unsigned depth_ = 0;
  unsigned count_ = 0;
};

}  // namespace

std::optional<std::string> peek_top_level_string(std::string_view text, std::string_view key, unsigned max_depth) {
  try {
    TopLevelPeek peek(key, max_depth);
    (void)Json::sax_parse(text.begin(), text.end(), &peek);
    return std::move(peek.found());
  } catch (const std::exception&) {  // allocation failure: cannot tell
    return std::nullopt;
  }
}

bool top_level_key_repeated(std::string_view text, std::string_view key, unsigned max_depth) {
  try {
    TopLevelKeyCount count(key, max_depth);
    (void)Json::sax_parse(text.begin(), text.end(), &count);
    return count.repeated();
  } catch (const std::exception&) {  // allocation failure: not seen
    return false;
  }
}

}  // namespace trainit
