// Status helpers shared by every component.
//
// Component APIs return absl::Status / absl::StatusOr<T> (STYLE.md rule 3). These macros keep the
// early-return boilerplate short. They evaluate their argument exactly once.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TOKIMQ_CONCAT_INNER_(a, b) a##b
#define TOKIMQ_CONCAT_(a, b) TOKIMQ_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define TOKIMQ_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::absl::Status tokimq_status_ = (expr);     \
    if (!tokimq_status_.ok()) return tokimq_status_; \
  } while (0)

// `lhs = *expr` if `expr` (an absl::StatusOr) is OK, otherwise returns its status.
#define TOKIMQ_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto TOKIMQ_CONCAT_(tokimq_statusor_, __LINE__) = (expr);                  \
  if (!TOKIMQ_CONCAT_(tokimq_statusor_, __LINE__).ok())                      \
    return TOKIMQ_CONCAT_(tokimq_statusor_, __LINE__).status();              \
  lhs = std::move(*TOKIMQ_CONCAT_(tokimq_statusor_, __LINE__))
