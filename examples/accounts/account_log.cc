#include "accounts/account_log.h"

#include <cstdio>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace tokimq::accounts {

using ordering::EventAtomicOrdering;

EventAtomicOrdering OrderingOf(const AccountEvent& e) {
  switch (e.type) {
    case EventType::kOpened:
      return EventAtomicOrdering::Acquire;
    case EventType::kDeposited:
    case EventType::kWithdrawn:
      return EventAtomicOrdering::Relaxed;
    case EventType::kClosed:
      return EventAtomicOrdering::Release;
    case EventType::kStatus:
      if (e.status == "frozen") return EventAtomicOrdering::AcqRel;
      if (e.status == "closed") return EventAtomicOrdering::Release;
      return EventAtomicOrdering::Relaxed;  // "active": a notification, may move freely
  }
  return EventAtomicOrdering::AcqRel;
}

std::string AccountName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "acct-%05d", i);
  return buf;
}

namespace {

// One account's events.
std::vector<AccountEvent> AccountLog(int i, int n, std::mt19937_64& rng) {
  std::vector<AccountEvent> out;
  const std::string name = AccountName(i);
  auto add = [&](EventType t, int64_t amount = 0, std::string status = "") {
    out.push_back({name, static_cast<int>(out.size()), t, amount, std::move(status)});
  };
  add(EventType::kOpened);
  bool open = true;
  const bool end_closed = rng() % 2 == 0;
  const int body = end_closed ? n - 3 : n - 1;
  for (int k = 0; k < body; ++k) {
    if (!open) {
      add(EventType::kOpened);
      open = true;
      continue;
    }
    const unsigned r = rng() % 100;
    if (r < 45) {
      add(EventType::kDeposited, 1 + static_cast<int64_t>(rng() % 100'000));
    } else if (r < 80) {
      add(EventType::kWithdrawn, 1 + static_cast<int64_t>(rng() % 50'000));
    } else if (r < 88) {
      add(EventType::kStatus, 0, "active");
    } else if (r < 95) {
      add(EventType::kStatus, 0, "frozen");
    } else if (k + 1 < body) {  // close and reopen later
      add(EventType::kClosed);
      open = false;
    } else {
      add(EventType::kDeposited, 1);
    }
  }
  if (!open) add(EventType::kOpened);
  if (end_closed) {
    add(EventType::kStatus, 0, "closed");
    add(EventType::kClosed);
  }
  return out;
}

}  // namespace

std::vector<AccountEvent> GenerateLog(int accounts, int events_per_account, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<AccountEvent>> per(static_cast<size_t>(accounts));
  for (int i = 0; i < accounts; ++i) per[i] = AccountLog(i, std::max(events_per_account, 4), rng);
  std::vector<size_t> next(per.size(), 0);
  std::vector<int> live;
  for (int i = 0; i < accounts; ++i) live.push_back(i);
  std::vector<AccountEvent> out;
  while (!live.empty()) {
    const size_t pick = rng() % live.size();
    const int a = live[pick];
    out.push_back(per[a][next[a]++]);
    if (next[a] == per[a].size()) {
      live[pick] = live.back();
      live.pop_back();
    }
  }
  return out;
}

std::string EncodeBody(const AccountEvent& e) {
  return std::to_string(static_cast<int>(e.type)) + "|" + std::to_string(e.seq) + "|" +
         std::to_string(e.amount) + "|" + e.status;
}

absl::StatusOr<AccountEvent> DecodeBody(const std::string& account, const std::string& body) {
  std::vector<std::string> f = absl::StrSplit(body, '|');
  int type = 0;
  AccountEvent e;
  e.account = account;
  if (f.size() != 4 || !absl::SimpleAtoi(f[0], &type) || type < 1 || type > 5 ||
      !absl::SimpleAtoi(f[1], &e.seq) || !absl::SimpleAtoi(f[2], &e.amount)) {
    return absl::InvalidArgumentError("malformed account event body: " + body);
  }
  e.type = static_cast<EventType>(type);
  e.status = f[3];
  return e;
}

std::map<std::string, AccountState> SequentialReplay(const std::vector<AccountEvent>& log) {
  std::map<std::string, AccountState> out;
  for (const AccountEvent& e : log) {
    AccountState& s = out[e.account];
    switch (e.type) {
      case EventType::kOpened:
        s.open = true;
        s.status = "active";
        break;
      case EventType::kDeposited:
        s.balance += e.amount;
        break;
      case EventType::kWithdrawn:
        s.balance -= e.amount;
        break;
      case EventType::kStatus:
        s.status = e.status;
        break;
      case EventType::kClosed:
        s.open = false;
        s.status = "closed";
        break;
    }
  }
  return out;
}

}  // namespace tokimq::accounts
