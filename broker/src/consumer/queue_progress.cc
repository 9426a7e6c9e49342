#include "consumer/queue_progress.h"

namespace tokimq::consumer {

void Progress::SetLease(int64_t offset, LeaseRecord lease) {
  if (!fifo) {
    leases[offset] = std::move(lease);
    return;
  }
  auto it = leases.find(offset);
  if (it != leases.end()) {
    fifo_index.Unlink(offset, it->second, leases);
    it->second = std::move(lease);
  } else {
    it = leases.emplace(offset, std::move(lease)).first;
  }
  fifo_index.Link(offset, it->second);
}

void Progress::EraseLease(int64_t offset) {
  auto it = leases.find(offset);
  if (it == leases.end()) return;
  if (fifo) fifo_index.Unlink(offset, it->second, leases);
  leases.erase(it);
}

void Progress::SetFifo(bool on) {
  if (on == fifo || (!on && fifo_index.parked() > 0)) return;
  fifo = on;
  if (on) {
    fifo_index.Rebuild(leases);
  } else {
    fifo_index.Clear();
  }
}

}  // namespace tokimq::consumer
