// The bank-account event log of the ordering seed (shared/seeds/000_*; docs/ordering.md):
// Opened = Acquire, Deposited / Withdrawn = Relaxed (deposits and withdrawals are each reduced
// by summing), Closed = Release, and a status event whose ordering depends on its value
// (Active = Relaxed, Frozen = AcqRel, Closed = Release). The log of a run is a pure function of
// (accounts, events per account, seed), so the producer, the consumer and the final check each
// rebuild it instead of sharing a file.
//
// Pure functions and value types; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ordering/plan.h"

namespace tokimq::accounts {

enum class EventType : uint16_t {  // the ORD_TAG of each type
  kOpened = 1,
  kDeposited = 2,
  kWithdrawn = 3,
  kClosed = 4,
  kStatus = 5,
};

struct AccountEvent {
  std::string account;  // "acct-00042": the message group and the ordering key
  int seq = 0;          // position in the account's log, from 0
  EventType type = EventType::kOpened;
  int64_t amount = 0;  // cents; Deposited / Withdrawn
  std::string status;  // kStatus: "active", "frozen" or "closed"
};

// The ordering of one event (the seed's per-message orderings).
ordering::EventAtomicOrdering OrderingOf(const AccountEvent& e);

// The whole log in publishing order: accounts interleaved at random, each account's events in
// its own order. Every account starts with Opened; accounts may close and reopen; about half
// end closed.
std::vector<AccountEvent> GenerateLog(int accounts, int events_per_account, uint64_t seed);

// Account name of index i.
std::string AccountName(int i);

// Message body "type|seq|amount|status" and back (InvalidArgument on a malformed body).
std::string EncodeBody(const AccountEvent& e);
absl::StatusOr<AccountEvent> DecodeBody(const std::string& account, const std::string& body);

// The projection of one account.
struct AccountState {
  int64_t balance = 0;
  std::string status;  // "" before the first Opened
  bool open = false;
  bool operator==(const AccountState&) const = default;
};

// Applying events one by one in log order: what the projection must equal at the end.
std::map<std::string, AccountState> SequentialReplay(const std::vector<AccountEvent>& log);

}  // namespace tokimq::accounts
