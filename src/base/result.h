// Result<T>: a value or an error with a one-line message.
//
// Syscall wrappers return negative errno (`int`); parsers and planners, whose
// failures need words, return Result<T>. Result never throws: reading the
// value of an error (or the error of a value) is a programmer error.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace trainit {

struct Error {
  std::string message;  // one line, names what was wrong and where
  int errnum = 0;       // errno behind it, 0 when none
  int exit_code = 0;    // the exit code it calls for (base/exit_code.h), where its producer knows one
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    assert(ok());
    return *std::get_if<0>(&v_);
  }
  const T& value() const& {
    assert(ok());
    return *std::get_if<0>(&v_);
  }
  T&& value() && {
    assert(ok());
    return std::move(*std::get_if<0>(&v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  [[nodiscard]] const Error& error() const {
    assert(!ok());
    return *std::get_if<1>(&v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  [[nodiscard]] const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace trainit
