#include "client/ordering/plan.h"

#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tokimq::ordering {

// Builds a Plan one key at a time. Holds the segment under construction: one local run per type
// (in order of first appearance), plus which type is head and which is tail.
class PlanBuilder {
 public:
  PlanBuilder(Plan* plan, std::span<const PlanRecord> records) : plan_(plan), records_(records) {}

  void Build() {
    plan_->record_count_ = records_.size();
    // Group indexes by key, keys in order of first appearance.
    absl::flat_hash_map<uint64_t, size_t> key_slot;
    std::vector<std::vector<size_t>> per_key;
    for (size_t i = 0; i < records_.size(); ++i) {
      auto [it, inserted] = key_slot.try_emplace(records_[i].key, per_key.size());
      if (inserted) {
        plan_->keys_.push_back(records_[i].key);
        per_key.emplace_back();
      }
      per_key[it->second].push_back(i);
    }
    for (size_t k = 0; k < per_key.size(); ++k) BuildKey(plan_->keys_[k], per_key[k]);
  }

 private:
  struct LocalRun {
    EventTypeTag tag;
    std::vector<size_t> records;
  };

  void BuildKey(uint64_t key, const std::vector<size_t>& indexes) {
    key_ = key;
    Plan::KeySegments range;
    range.begin = static_cast<uint32_t>(plan_->segments_.size());
    for (size_t i : indexes) {
      const PlanRecord& r = records_[i];
      switch (r.ordering) {
        case EventAtomicOrdering::Acquire:
        case EventAtomicOrdering::AcqRel:
          CloseSegment();
          head_ = r.tag;
          Add(r.tag, i);
          break;
        case EventAtomicOrdering::Relaxed:
          Add(r.tag, i);
          break;
        case EventAtomicOrdering::Release:
          if (head_ == r.tag && runs_.size() > 1) {
            // One run cannot be both first and last: the Release stands alone.
            CloseSegment();
            Add(r.tag, i);
            tail_ = r.tag;
          } else {
            Add(r.tag, i);
            if (head_ != r.tag) tail_ = r.tag;
          }
          CloseSegment();
          break;
        default:
          // Out-of-range enum value (only reachable by casting): treat as a full barrier, the
          // safest reading.
          CloseSegment();
          head_ = r.tag;
          Add(r.tag, i);
          CloseSegment();
          break;
      }
    }
    CloseSegment();
    range.end = static_cast<uint32_t>(plan_->segments_.size());
    plan_->key_segments_.emplace(key, range);
  }

  void Add(EventTypeTag tag, size_t index) {
    auto [it, inserted] = run_slot_.try_emplace(tag, runs_.size());
    if (inserted) runs_.push_back(LocalRun{tag, {}});
    runs_[it->second].records.push_back(index);
  }

  uint32_t EmitRun(LocalRun& run) {
    Plan::RunData data;
    data.key = key_;
    data.tag = run.tag;
    data.begin = static_cast<uint32_t>(plan_->run_records_.size());
    plan_->run_records_.insert(plan_->run_records_.end(), run.records.begin(), run.records.end());
    data.end = static_cast<uint32_t>(plan_->run_records_.size());
    plan_->runs_.push_back(data);
    return static_cast<uint32_t>(plan_->runs_.size() - 1);
  }

  void CloseSegment() {
    if (!runs_.empty()) {
      Plan::SegmentData seg;
      if (head_) seg.head = EmitRun(runs_[run_slot_.at(*head_)]);
      seg.body_begin = static_cast<uint32_t>(plan_->body_runs_.size());
      for (LocalRun& run : runs_) {
        if (run.tag == head_ || run.tag == tail_) continue;
        plan_->body_runs_.push_back(RunId{EmitRun(run)});
      }
      seg.body_end = static_cast<uint32_t>(plan_->body_runs_.size());
      if (tail_) seg.tail = EmitRun(runs_[run_slot_.at(*tail_)]);
      const auto id = static_cast<uint32_t>(plan_->segments_.size());
      plan_->segments_.push_back(seg);
      plan_->segment_ids_.push_back(SegmentId{id});
    }
    runs_.clear();
    run_slot_.clear();
    head_.reset();
    tail_.reset();
  }

  Plan* plan_;
  std::span<const PlanRecord> records_;
  uint64_t key_ = 0;
  std::vector<LocalRun> runs_;
  absl::flat_hash_map<EventTypeTag, size_t> run_slot_;
  std::optional<EventTypeTag> head_;
  std::optional<EventTypeTag> tail_;
};

Plan Plan::New(std::span<const PlanRecord> records) {
  Plan plan;
  PlanBuilder(&plan, records).Build();
  return plan;
}

std::span<const SegmentId> Plan::segments(uint64_t key) const {
  auto it = key_segments_.find(key);
  if (it == key_segments_.end()) return {};
  return std::span<const SegmentId>(segment_ids_)
      .subspan(it->second.begin, it->second.end - it->second.begin);
}

std::optional<RunId> Plan::head(SegmentId segment) const {
  assert(segment.value < segments_.size());
  const uint32_t r = segments_[segment.value].head;
  if (r == kNoRun) return std::nullopt;
  return RunId{r};
}

std::span<const RunId> Plan::body(SegmentId segment) const {
  assert(segment.value < segments_.size());
  const SegmentData& s = segments_[segment.value];
  return std::span<const RunId>(body_runs_).subspan(s.body_begin, s.body_end - s.body_begin);
}

std::optional<RunId> Plan::tail(SegmentId segment) const {
  assert(segment.value < segments_.size());
  const uint32_t r = segments_[segment.value].tail;
  if (r == kNoRun) return std::nullopt;
  return RunId{r};
}

std::span<const size_t> Plan::records(RunId run) const {
  assert(run.value < runs_.size());
  const RunData& r = runs_[run.value];
  return std::span<const size_t>(run_records_).subspan(r.begin, r.end - r.begin);
}

uint64_t Plan::key(RunId run) const {
  assert(run.value < runs_.size());
  return runs_[run.value].key;
}

EventTypeTag Plan::tag(RunId run) const {
  assert(run.value < runs_.size());
  return runs_[run.value].tag;
}

namespace {

std::string RunString(const Plan& plan, RunId run) {
  std::string out = "[";
  bool first = true;
  for (size_t i : plan.records(run)) {
    absl::StrAppend(&out, first ? "" : ",", i);
    first = false;
  }
  out += "]";
  return out;
}

}  // namespace

std::string Plan::DebugString() const {
  std::string out;
  for (uint64_t key : keys_) {
    if (!out.empty()) out += "; ";
    absl::StrAppend(&out, "key ", key, ":");
    for (SegmentId seg : segments(key)) {
      out += " seg{";
      std::string parts;
      if (auto h = head(seg)) parts += "head" + RunString(*this, *h);
      if (!body(seg).empty()) {
        if (!parts.empty()) parts += " ";
        parts += "body";
        for (RunId r : body(seg)) parts += RunString(*this, r);
      }
      if (auto t = tail(seg)) {
        if (!parts.empty()) parts += " ";
        parts += "tail" + RunString(*this, *t);
      }
      out += parts + "}";
    }
  }
  return out;
}

}  // namespace tokimq::ordering
