// History: a Jepsen-style record of what clients saw of a tokimq broker group under faults, and
// the checker that holds it against the documented guarantees (docs/cluster.md "Guarantees per
// ack mode"; issue 20 item 7).
//
// Every message has a unique history id (its body). Recorded, from any client thread:
//   - Attempt: a send is about to go out; deliver_at_min_ms is a lower bound of the deliver time
//     the broker will give it (client clock at the attempt + delay: the broker's now is later).
//   - SendOk: the broker acknowledged it, with the deliver time it gave (and the client time of
//     the acknowledgement, for async mode's loss window).
//   - Received: a consumer got it, from which copy (broker group, queue id, queue offset) and
//     when (client clock after the answer arrived).
//   - Acked: the consumer acknowledged that delivery (ok or not).
// Check sorts the history into:
//   lost        acknowledged sends never received (sync mode promises 0)
//   early       receipts before the message's earliest possible deliver time (never allowed):
//               the first attempt's client time + delay. Not the acknowledged deliver time: a
//               client that retried a send whose answer was lost (ClusterProducer across a
//               failover) stored two copies, and the first copy's deliver time is earlier than
//               the acknowledged second's. The bound is below the broker's by one send latency.
//   timer_duplicates  extra *copies* of one message: receipts of one id at several queue
//               positions (a timer move repeated by a new leader, a producer retry that stored it
//               twice) — reported apart, expected until timer-move dedupe lands
//   redelivered receipts of a copy already received (lease expiry, consumer state that did not
//               survive a failover) — at-least-once, reported
//   phantom     receipts of ids never sent
// Clocks: client and broker read the same host clock (tests on one machine).
// Thread-safety: every method from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tokimq::testing {

class History {
 public:
  void Attempt(const std::string& id, int64_t deliver_at_min_ms);
  void SendOk(const std::string& id, int64_t deliver_at_ms);
  // `delivery_attempt` > 1: a retry copy (%RETRY%<group>, after a lease that expired unacked,
  // e.g. an ack lost in a failover): a redelivery of the message, not another copy of it.
  // `source`: the copy's TIMER_SRC_OFFSET property (the CommitLog offset of the delayed record
  // it was released from; "" when unknown): two copies of one source are a timer move made
  // twice, two copies of different sources a send stored twice (a producer's retry).
  void Received(const std::string& id, const std::string& group, int32_t queue_id,
                int64_t queue_offset, int64_t at_ms, int delivery_attempt = 1,
                const std::string& source = "");
  void Acked(const std::string& id, bool ok);

  struct Report {
    int64_t attempted = 0;
    int64_t acknowledged = 0;  // SendOk
    int64_t received_ids = 0;  // distinct ids received
    int64_t receipts = 0;
    int64_t lost = 0;
    int64_t early = 0;
    // Copies of one message at more than one queue position: of the same source (or of an
    // unknown one) in timer_duplicates, of different sources in send_duplicates.
    int64_t timer_duplicates = 0;
    int64_t send_duplicates = 0;
    int64_t redelivered = 0;
    int64_t phantom = 0;
    int64_t indeterminate_received = 0;  // sends without an ack that were stored after all
    std::vector<std::string> lost_ids;   // the first few
    std::vector<int64_t> lost_ack_ms;    // every lost send's acknowledgement time (client, ms)
    std::vector<std::string> early_ids;  // the first few
    // The first few ids received at more than one (group, queue, offset), each as
    // "id: group/queue@offset first receipt ms, ..." (client ms): which copies a failover made.
    std::vector<std::string> duplicate_examples;
    std::string ToString() const;
  };
  Report Check() const;

  // Ids acknowledged but not (yet) received: what a consumer still waits for.
  int64_t Outstanding() const;
  // Receipts of copies held by broker group `group` (the broker name of the receipt handle).
  int64_t ReceiptsFrom(const std::string& group) const;

 private:
  struct Message {
    bool attempted = false;
    bool acknowledged = false;
    int64_t deliver_at_min_ms = 0;  // the first attempt's lower bound
    int64_t deliver_at_ms = 0;      // acknowledged: the broker's
    int64_t ack_ms = 0;             // acknowledged: client time of the first acknowledgement
    struct Copy {
      int receipts = 0;
      int64_t first_ms = 0;  // client time of its first receipt
      std::string source;    // TIMER_SRC_OFFSET
    };
    // (group, queue id, queue offset) -> that copy's receipts
    std::map<std::tuple<std::string, int32_t, int64_t>, Copy> copies;
    int retry_receipts = 0;  // receipts of retry copies (delivery_attempt > 1)
    bool received() const { return !copies.empty() || retry_receipts > 0; }
    int64_t earliest_receipt_ms = -1;
  };
  mutable std::mutex mu_;
  std::map<std::string, Message> messages_;  // mu_
  int64_t outstanding_ = 0;                  // mu_: acknowledged, never received
};

}  // namespace tokimq::testing
