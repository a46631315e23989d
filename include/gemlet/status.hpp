// Status and Result<T>: the error values of gemlet's public API and of the library inside it. No
// exceptions cross the API; every failure carries a message a user can act on.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gemlet {

// What kind of failure a Status is, for callers that act on it (the C API's status codes). Most
// failures are kError: a bad file, a bad input; the message says which.
enum class StatusCode {
  kOk = 0,
  kError = 1,            // bad input or file (the message names it)
  kInvalidArgument = 2,  // the caller broke the API's contract (a bad option, a null handle)
  kCancelled = 3,        // stopped by Cancel() or a callback's answer
  kContextFull = 4,      // the session's context has no room for the tokens
  kOutOfMemory = 5,      // an allocation, or the memory budget, failed
  // (6 is the C API's GEMLET_BUFFER_TOO_SMALL, which C++ callers never meet)
  kTooLarge = 7,         // the input is over a limit the caller set (a clip over AudioOptions::max_seconds)
};

// A failed operation says what went wrong in words a user can act on; success carries no text.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(StatusCode::kError, std::move(message)); }
  static Status Error(StatusCode code, std::string message) { return Status(code, std::move(message)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Adds context in front: "loading model.gguf: " + "tensor 'x' ...".
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message)
      : message_(std::move(message)), code_(code == StatusCode::kOk ? StatusCode::kError : code) {}
  std::string message_;
  StatusCode code_ = StatusCode::kOk;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) { assert(!std::get<Status>(value_).ok()); }

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }
  const std::string& message() const {
    static const std::string kEmpty;
    return ok() ? kEmpty : std::get<Status>(value_).message();
  }

  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace gemlet
