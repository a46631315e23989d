// Status and Result<T> (public: include/gemlet/status.hpp) and the macros the library uses with them.
#pragma once

#include "gemlet/status.hpp"


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
