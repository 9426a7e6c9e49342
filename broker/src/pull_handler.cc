// Offset-based consumption (RocketMQ's PullConsumer; docs/protocol.md "Offset-based
// consumption"): Broker::HandlePull reads one queue from a client-given offset with no lease;
// HandleGetOffset / HandleUpdateOffset keep a group's committed offset per queue in the group
// state store (docs/formats/group-state.md "committed-offset-key"); HandleQueryOffset finds the
// first, the end or a time's offset of a queue.
#include <algorithm>
#include <mutex>

#include "broker/broker.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/coding.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "consumer/group_state.h"
#include "consumer/message_filter.h"
#include "disk_watermark.h"
#include "replication/replication_service.h"
#include "fmt/format.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace tokimq::broker {
namespace {

// Serialises committed-offset writes with their group-state records, so the replicated order
// of one key is its write order (one per process: these writes are rare and short).
std::mutex& CommittedOffsetMutex() {
  static std::mutex mu;
  return mu;
}

// Messages one Pull answers by default (RocketMQ's pullBatchSize default).
constexpr int kDefaultPullBatch = 32;

std::string_view Prop(const record::RecordView& m, const char* name) {
  std::string_view v;
  return m.FindProperty(name, &v) ? v : std::string_view();
}

void ToProto(const record::RecordView& m, proto::ReceivedMessage* out) {
  out->set_message_id(std::string(Prop(m, prop::kMessageId)));
  out->set_topic(std::string(m.topic));
  out->set_queue_id(m.queue_id);
  out->set_queue_offset(m.queue_offset.value());
  out->set_key(std::string(Prop(m, prop::kKeys)));
  out->set_tag(std::string(Prop(m, prop::kTag)));
  Decoder pd(m.properties);
  std::string_view k, v;
  auto* props = out->mutable_properties();
  while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&v)) {
    props->insert({std::string(k), std::string(v)});  // the first of a repeated key wins
  }
  out->set_born_ms(m.born_ms);
  out->set_delivery_attempt(1);
  int64_t deliver_ms = m.store_ms;
  ParseInt64(Prop(m, prop::kDeliverMs), &deliver_ms);
  out->set_deliver_ms(deliver_ms);
  out->set_body(std::string(m.body));
}

}  // namespace

absl::Status Broker::CheckQueue(const std::string& topic, int32_t queue_id) const {
  TOKIMQ_ASSIGN_OR_RETURN(TopicConfig t, ResolveTopic(topic));
  if (queue_id < 0 || queue_id >= t.queues) {
    return absl::InvalidArgumentError(
        fmt::format("queue id {} out of range: topic {} has {} queues", queue_id, topic, t.queues));
  }
  return absl::OkStatus();
}

absl::Status Broker::HandlePull(const proto::PullRequest& req, proto::PullResponse* resp) {
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupName(req.group()));
  TOKIMQ_RETURN_IF_ERROR(CheckQueue(req.topic(), req.queue_id()));
  if (req.max_messages() < 0 || req.max_messages() > kMaxReceiveBatch) {
    return absl::InvalidArgumentError(fmt::format("max messages must be 1..{}", kMaxReceiveBatch));
  }
  if (!proto::FilterType_IsValid(req.filter_type())) {
    return absl::InvalidArgumentError(
        fmt::format("unknown filter type {}", static_cast<int>(req.filter_type())));
  }
  TOKIMQ_ASSIGN_OR_RETURN(
      std::shared_ptr<const consumer::SqlFilter> sql,
      consumer::RequestSqlFilter(req.filter_type() == proto::FILTER_SQL92, req.filter_expression()));
  const int want = req.max_messages() == 0 ? kDefaultPullBatch : req.max_messages();
  const int64_t min = store_->MinQueueOffset(req.topic(), req.queue_id()).value();
  const int64_t max = store_->MaxQueueOffset(req.topic(), req.queue_id()).value();
  resp->set_min_offset(min);
  resp->set_max_offset(max);
  if (req.offset() < min || req.offset() > max) {
    resp->set_offset_illegal(true);
    resp->set_next_offset(req.offset() < min ? min : max);
    return absl::OkStatus();
  }
  // Read in chunks until `want` messages passed the filters, the queue ends or the answer
  // holds kMaxReceiveResponseBytes (at least one message).
  int64_t next = req.offset();
  int64_t bytes = 0;
  bool full = false;
  while (!full && next < max && resp->messages_size() < want) {
    const int chunk = std::min(want - resp->messages_size(), 64);
    TOKIMQ_ASSIGN_OR_RETURN(
        size_t n, store_->VisitQueue(req.topic(), req.queue_id(), QueueOffset(next), chunk,
                                     [&](const record::RecordView& m) -> absl::Status {
                                       if (full) return absl::OkStatus();
                                       if (resp->messages_size() > 0 &&
                                           bytes + m.size > kMaxReceiveResponseBytes) {
                                         full = true;  // read, not answered: the next pull's
                                         return absl::OkStatus();
                                       }
                                       next = m.queue_offset.value() + 1;
                                       if (!consumer::PassesFilters(req.tag_filter(), sql.get(),
                                                                    m)) {
                                         return absl::OkStatus();
                                       }
                                       bytes += m.size;
                                       ToProto(m, resp->add_messages());
                                       return absl::OkStatus();
                                     }));
    if (n == 0) next = std::min(next + chunk, max);  // removed by retention
  }
  resp->set_next_offset(next);
  return absl::OkStatus();
}

absl::Status Broker::HandleGetOffset(const proto::GetOffsetRequest& req,
                                     proto::OffsetResponse* resp) {
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupName(req.group()));
  TOKIMQ_RETURN_IF_ERROR(CheckQueue(req.topic(), req.queue_id()));
  const std::string key = consumer::CommittedOffsetKey(req.group(), req.topic(), req.queue_id());
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) {
    return absl::NotFoundError(fmt::format("group {} has no committed offset for {}/{}",
                                           req.group(), req.topic(), req.queue_id()));
  }
  if (!s.ok()) return absl::UnavailableError("group state read failed: " + s.ToString());
  TOKIMQ_ASSIGN_OR_RETURN(int64_t offset, consumer::DecodeOffsetValue(key, value));
  resp->set_offset(offset);
  return absl::OkStatus();
}

absl::Status Broker::HandleUpdateOffset(const proto::UpdateOffsetRequest& req) {
  TOKIMQ_RETURN_IF_ERROR(ValidateGroupName(req.group()));
  TOKIMQ_RETURN_IF_ERROR(CheckQueue(req.topic(), req.queue_id()));
  if (req.offset() < 0) return absl::InvalidArgumentError("offset must be >= 0");
  const std::string key = consumer::CommittedOffsetKey(req.group(), req.topic(), req.queue_id());
  const std::string value = consumer::EncodeOffsetValue(key, req.offset());
  TOKIMQ_RETURN_IF_ERROR(watermark_->AdmitOwnWrite(key.size() + value.size()));
  // Synced before the answer: a committed offset never goes back after a power loss.
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::WriteBatch batch;
  batch.Put(key, value);
  rocksdb::Status s;
  {
    // One committed offset at a time, so the replicated record order is the write order.
    std::lock_guard<std::mutex> l(CommittedOffsetMutex());
    TOKIMQ_RETURN_IF_ERROR(replication_->LogStateWrite(batch));
    s = db_->Write(sync, &batch);
  }
  if (!s.ok()) return absl::UnavailableError("group state write failed: " + s.ToString());
  return replication_->AwaitStateReplicated();
}

absl::Status Broker::HandleQueryOffset(const proto::QueryOffsetRequest& req,
                                       proto::OffsetResponse* resp) {
  TOKIMQ_RETURN_IF_ERROR(CheckQueue(req.topic(), req.queue_id()));
  const int64_t min = store_->MinQueueOffset(req.topic(), req.queue_id()).value();
  const int64_t max = store_->MaxQueueOffset(req.topic(), req.queue_id()).value();
  switch (req.policy()) {
    case proto::QueryOffsetRequest::BEGINNING:
      resp->set_offset(min);
      return absl::OkStatus();
    case proto::QueryOffsetRequest::END:
      resp->set_offset(max);
      return absl::OkStatus();
    case proto::QueryOffsetRequest::TIMESTAMP:
      break;
    default:
      return absl::InvalidArgumentError(
          fmt::format("unknown query offset policy {}", static_cast<int>(req.policy())));
  }
  // Binary search for the first offset stored at or after timestamp_ms: a queue's store times
  // do not decrease (one appender per queue, the CommitLog's clock). An offset retention
  // removed in between counts as before the time.
  int64_t lo = min, hi = max;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    int64_t store_ms = INT64_MIN;
    int64_t found_offset = mid;
    TOKIMQ_RETURN_IF_ERROR(
        store_
            ->VisitQueue(req.topic(), req.queue_id(), QueueOffset(mid), 1,
                         [&](const record::RecordView& m) {
                           store_ms = m.store_ms;
                           found_offset = m.queue_offset.value();
                           return absl::OkStatus();
                         })
            .status());
    if (store_ms >= req.timestamp_ms()) {
      hi = mid;
    } else {
      lo = std::max(found_offset, mid) + 1;
    }
  }
  resp->set_offset(lo);
  return absl::OkStatus();
}

}  // namespace tokimq::broker
