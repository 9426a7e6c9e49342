// HandOffBatch (see common/hand_off_batch.h).
#include "common/hand_off_batch.h"

namespace tokimq {
namespace {

thread_local HandOffBatch* current_batch = nullptr;

}  // namespace

HandOffBatch::HandOffBatch() : outer_(current_batch) { current_batch = this; }

HandOffBatch::~HandOffBatch() {
  current_batch = outer_;
  Flush();
}

bool HandOffBatch::Add(void* target, PostFn post, Task& task) {
  HandOffBatch* b = current_batch;
  if (b == nullptr) return false;
  for (Target& t : b->targets_) {
    if (t.target == target) {
      t.tasks.push_back(std::move(task));
      return true;
    }
  }
  b->targets_.push_back(Target{target, post, {}});
  b->targets_.back().tasks.push_back(std::move(task));
  return true;
}

void HandOffBatch::Flush() {
  // A PostFn may run a callback that adds to this batch again (it would be a bug for it to
  // block): take the list first, so such an Add starts a new list instead of growing this one.
  std::vector<Target> targets;
  targets.swap(targets_);
  for (Target& t : targets) {
    ++posts_;
    tasks_ += t.tasks.size();
    t.post(t.target, std::move(t.tasks));
  }
}

}  // namespace tokimq
