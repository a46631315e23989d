// Status and Result<T>: error values that carry a human-readable message through the library.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gemlet {

// A failed operation says what went wrong in words a user can act on; success carries no text.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Adds context in front: "loading model.gguf: " + "tensor 'x' ...".
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Error(context + ": " + message_);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
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

#define GEMLET_CONCAT_INNER(a, b) a##b
#define GEMLET_CONCAT(a, b) GEMLET_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::gemlet::Status gemlet_status_ = (expr);          \
    if (!gemlet_status_.ok()) return gemlet_status_;   \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// `ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a Result or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(GEMLET_CONCAT(result_, __LINE__), lhs, expr)
