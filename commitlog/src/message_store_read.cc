// MessageStoreImpl reads: by physical offset (ReadMany, VisitMany) and by queue (GetEntry,
// ReadQueue, VisitQueue). Both batch paths group nearby records into runs read with one pread
// (ReadRunEnd in message_store_impl.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "commitlog/record.h"
#include "message_store_impl.h"

namespace tokimq {

std::vector<absl::StatusOr<Message>> MessageStoreImpl::ReadMany(
    std::span<const ReadRequest> reqs) const {
  std::vector<absl::StatusOr<Message>> out(reqs.size(), absl::UnknownError("unread"));
  VisitMany(reqs, [&out](size_t i, const absl::StatusOr<record::RecordView>& view) {
    if (!view.ok()) {
      out[i] = view.status();
      return;
    }
    Message m;
    record::MessageFromView(*view, &m);
    out[i] = std::move(m);
  });
  return out;
}

void MessageStoreImpl::VisitMany(std::span<const ReadRequest> reqs,
                                 const IndexedRecordVisitor& visit) const {
  std::vector<size_t> order(reqs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return reqs[a].physical_offset < reqs[b].physical_offset; });
  const auto offset = [&](size_t k) { return reqs[order[k]].physical_offset.value(); };
  const auto size = [&](size_t k) { return int64_t{reqs[order[k]].size}; };
  const int64_t seg_size = log_->segment_size();
  std::string buf;
  size_t i = 0;
  while (i < order.size()) {
    const ReadRequest& first = reqs[order[i]];
    const PhysicalOffset start = first.physical_offset;
    int64_t end = 0;
    const size_t j = ReadRunEnd(i, order.size(), seg_size, offset, size, &end);
    std::shared_ptr<const Segment> keep;
    absl::StatusOr<std::string_view> run = absl::NotFoundError("");
    if (start.value() >= 0 && first.size >= record::kMinMessageSize &&
        end - start.value() <= static_cast<int64_t>(kMaxReadRun)) {
      run = log_->ReadSpan(start, static_cast<size_t>(end - start.value()), &buf, &keep);
    }
    for (size_t k = i; k < j; ++k) {
      const ReadRequest& r = reqs[order[k]];
      if (run.ok() && r.size >= record::kMinMessageSize &&
          (r.physical_offset + r.size).value() <= end) {
        record::RecordView view;
        const auto rel = static_cast<size_t>(r.physical_offset - start);
        if (log_->DecodeViewAt(run->substr(rel, r.size), r.physical_offset, &view).ok()) {
          visit(order[k], view);
          continue;
        }
      }
      // Anything unusual (wrong size, deleted, past the end, corrupt): Read gives the
      // exact answer and error.
      VisitEncoded(log_->Read(r.physical_offset), order[k], visit);
    }
    i = j;
  }
}

absl::StatusOr<std::optional<ConsumeQueueEntry>> MessageStoreImpl::GetEntry(
    const std::string& topic, int32_t queue_id, QueueOffset queue_offset) const {
  auto cq = Find(topic, queue_id);
  if (cq == nullptr) return std::nullopt;
  if (queue_offset < cq->MinValidOffset() && queue_offset < cq->MaxOffset()) {
    return absl::NotFoundError(absl::StrCat("queue offset ", queue_offset.value(), " of ", topic,
                                            "/", queue_id, " was deleted"));
  }
  return cq->Get(queue_offset);
}

absl::StatusOr<std::vector<Message>> MessageStoreImpl::ReadQueue(const std::string& topic,
                                                                 int32_t queue_id,
                                                                 QueueOffset from_offset,
                                                                 int max_count) const {
  std::vector<Message> out;
  TOKIMQ_RETURN_IF_ERROR(
      VisitQueue(topic, queue_id, from_offset, max_count, [&out](const record::RecordView& v) {
        record::MessageFromView(v, &out.emplace_back());
        return absl::OkStatus();
      }).status());
  return out;
}

absl::StatusOr<size_t> MessageStoreImpl::VisitQueue(const std::string& topic, int32_t queue_id,
                                                    QueueOffset from_offset, int max_count,
                                                    const RecordVisitor& visit) const {
  size_t visited = 0;
  auto cq = Find(topic, queue_id);
  if (cq == nullptr || max_count <= 0) return visited;
  const QueueOffset start = std::max(from_offset, cq->MinValidOffset());
  TOKIMQ_ASSIGN_OR_RETURN(auto entries, cq->Entries(start, static_cast<size_t>(max_count)));
  const auto offset = [&](size_t k) { return entries[k].physical_offset.value(); };
  const auto size = [&](size_t k) { return int64_t{entries[k].size}; };
  const PhysicalOffset min_phys = log_->MinOffset();
  const int64_t seg_size = log_->segment_size();
  std::string buf;
  size_t i = 0;
  while (i < entries.size()) {
    if (entries[i].physical_offset < min_phys) {
      ++i;
      continue;
    }
    const PhysicalOffset run_start = entries[i].physical_offset;
    int64_t end = 0;
    const size_t j = ReadRunEnd(i, entries.size(), seg_size, offset, size, &end);
    std::shared_ptr<const Segment> keep;
    absl::StatusOr<std::string_view> run =
        log_->ReadSpan(run_start, static_cast<size_t>(end - run_start.value()), &buf, &keep);
    if (absl::IsNotFound(run.status())) {  // deleted by retention meanwhile
      i = j;
      continue;
    }
    TOKIMQ_RETURN_IF_ERROR(run.status());
    for (size_t k = i; k < j; ++k) {
      record::RecordView v;
      const auto pos = static_cast<size_t>(entries[k].physical_offset - run_start);
      TOKIMQ_RETURN_IF_ERROR(
          log_->DecodeViewAt(run->substr(pos, entries[k].size), entries[k].physical_offset, &v));
      const QueueOffset qo = start + static_cast<int64_t>(k);
      if (v.topic != topic || v.queue_id != queue_id || v.queue_offset != qo) {
        return absl::DataLossError(
            absl::StrCat("consume queue ", topic, "/", queue_id, " entry ", qo.value(),
                         " points at offset ", entries[k].physical_offset.value(), " which holds ",
                         std::string(v.topic), "/", v.queue_id, "#", v.queue_offset.value()));
      }
      TOKIMQ_RETURN_IF_ERROR(visit(v));
      ++visited;
    }
    i = j;
  }
  return visited;
}

}  // namespace tokimq
