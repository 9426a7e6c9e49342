#include "order_timeout/order_log.h"

#include <cstring>
#include <string_view>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq::order_timeout {
namespace {

constexpr char kMagic[8] = {'T', 'K', 'O', 'R', 'D', 'L', 'O', 'G'};
constexpr uint32_t kVersion = 1;

bool DecodeHeader(std::string_view h, RunConfig* config) {
  if (h.size() < kOrderLogHeaderSize) return false;
  if (std::memcmp(h.data(), kMagic, sizeof(kMagic)) != 0) return false;
  if (DecodeFixed32(h.data() + 48) != crc32c::Value(h.data(), 48)) return false;
  if (DecodeFixed32(h.data() + 8) != kVersion) return false;
  if (DecodeFixed32(h.data() + 52) != 0) return false;
  config->paid_ppm = DecodeFixed32(h.data() + 12);
  config->run_id = DecodeFixed64(h.data() + 16);
  config->orders = DecodeFixed64(h.data() + 24);
  config->timeout_ms = static_cast<int64_t>(DecodeFixed64(h.data() + 32));
  config->seed = DecodeFixed64(h.data() + 40);
  return config->paid_ppm <= 1'000'000 && config->timeout_ms >= 0;
}

// False if the record's checksum, event or reserved bytes are wrong or its order id is out of
// range for the run.
bool DecodeRecord(const char* p, uint64_t orders, OrderRecord* rec) {
  if (DecodeFixed32(p) != crc32c::Value(p + 4, kOrderLogRecordSize - 4)) return false;
  uint8_t event = static_cast<uint8_t>(p[4]);
  if (event < 1 || event > 4 || p[5] != 0 || p[6] != 0 || p[7] != 0) return false;
  rec->event = static_cast<OrderEvent>(event);
  rec->order_id = DecodeFixed64(p + 8);
  rec->time_ms = static_cast<int64_t>(DecodeFixed64(p + 16));
  return rec->order_id < orders;
}

struct ScanResult {
  RunConfig config;
  uint64_t good_records = 0;  // valid prefix
  bool torn_tail = false;     // bytes after the valid prefix that are not corruption
};

// Reads the header and the valid prefix of records. With `strict`, a bad record followed by a
// valid one is kDataLoss; without, scanning just stops at the first bad record.
absl::StatusOr<ScanResult> ScanFile(File* file, bool strict, const OrderLog::ReplayFn& replay) {
  ScanResult out;
  char header[kOrderLogHeaderSize];
  TOKIMQ_ASSIGN_OR_RETURN(size_t n, file->PRead(0, sizeof(header), header));
  if (n != sizeof(header) || !DecodeHeader(std::string_view(header, n), &out.config)) {
    return absl::DataLossError("order log " + file->path() + ": bad or missing header");
  }
  const uint64_t size = file->Size();
  const uint64_t records = (size - kOrderLogHeaderSize) / kOrderLogRecordSize;
  constexpr size_t kChunkRecords = 4096;
  std::string chunk(kChunkRecords * kOrderLogRecordSize, '\0');
  uint64_t i = 0;
  bool bad = false;
  while (i < records && !bad) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkRecords, records - i));
    uint64_t off = kOrderLogHeaderSize + i * kOrderLogRecordSize;
    TOKIMQ_ASSIGN_OR_RETURN(size_t got, file->PRead(off, want * kOrderLogRecordSize, chunk.data()));
    if (got != want * kOrderLogRecordSize) {
      return absl::DataLossError("order log " + file->path() + ": short read");
    }
    for (size_t k = 0; k < want; ++k, ++i) {
      OrderRecord rec;
      if (!DecodeRecord(chunk.data() + k * kOrderLogRecordSize, out.config.orders, &rec)) {
        bad = true;
        break;
      }
      if (replay) replay(rec);
    }
  }
  out.good_records = i;
  out.torn_tail = size > kOrderLogHeaderSize + i * kOrderLogRecordSize;
  if (!bad || !strict) return out;
  // A bad record: only a torn tail if nothing valid follows it.
  const uint64_t bad_offset = kOrderLogHeaderSize + i * kOrderLogRecordSize;
  char rec_buf[kOrderLogRecordSize];
  for (uint64_t j = i + 1; j < records; ++j) {
    uint64_t off = kOrderLogHeaderSize + j * kOrderLogRecordSize;
    TOKIMQ_ASSIGN_OR_RETURN(size_t got, file->PRead(off, sizeof(rec_buf), rec_buf));
    OrderRecord rec;
    if (got == sizeof(rec_buf) && DecodeRecord(rec_buf, out.config.orders, &rec)) {
      return absl::DataLossError("order log " + file->path() + ": corrupt record at offset " +
                                 std::to_string(bad_offset) + " followed by valid records");
    }
  }
  return out;
}

}  // namespace

std::string OrderLog::EncodeHeader(const RunConfig& c) {
  std::string h(kMagic, sizeof(kMagic));
  PutFixed32(&h, kVersion);
  PutFixed32(&h, c.paid_ppm);
  PutFixed64(&h, c.run_id);
  PutFixed64(&h, c.orders);
  PutFixed64(&h, static_cast<uint64_t>(c.timeout_ms));
  PutFixed64(&h, c.seed);
  PutFixed32(&h, crc32c::Value(h.data(), h.size()));
  PutFixed32(&h, 0);
  return h;
}

std::string OrderLog::EncodeRecord(const OrderRecord& rec) {
  char buf[kOrderLogRecordSize] = {};
  buf[4] = static_cast<char>(rec.event);
  EncodeFixed64(buf + 8, rec.order_id);
  EncodeFixed64(buf + 16, static_cast<uint64_t>(rec.time_ms));
  EncodeFixed32(buf, crc32c::Value(buf + 4, kOrderLogRecordSize - 4));
  return std::string(buf, sizeof(buf));
}

OrderLog::OrderLog(std::unique_ptr<File> file, RunConfig config, uint64_t records)
    : file_(std::move(file)), config_(config), appended_seq_(records), durable_seq_(records) {}

OrderLog::~OrderLog() { (void)SyncAll(); }

absl::StatusOr<std::unique_ptr<OrderLog>> OrderLog::Create(FileSystem* fs,
                                                           const std::string& path,
                                                           const RunConfig& config) {
  if (fs->Exists(path)) return absl::AlreadyExistsError("order log " + path + " already exists");
  TOKIMQ_RETURN_IF_ERROR(fs->CreateDirs(DirName(path)));
  TOKIMQ_RETURN_IF_ERROR(WriteFileAtomic(fs, path, EncodeHeader(config)));
  TOKIMQ_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs->Open(path, OpenMode::kReadWrite));
  return std::unique_ptr<OrderLog>(new OrderLog(std::move(file), config, 0));
}

absl::StatusOr<std::unique_ptr<OrderLog>> OrderLog::Open(FileSystem* fs, const std::string& path,
                                                         const ReplayFn& replay) {
  if (!fs->Exists(path)) return absl::NotFoundError("order log " + path + " does not exist");
  TOKIMQ_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs->Open(path, OpenMode::kReadWrite));
  TOKIMQ_ASSIGN_OR_RETURN(ScanResult scan, ScanFile(file.get(), /*strict=*/true, replay));
  if (scan.torn_tail) {
    TOKIMQ_RETURN_IF_ERROR(
        file->Truncate(kOrderLogHeaderSize + scan.good_records * kOrderLogRecordSize));
    TOKIMQ_RETURN_IF_ERROR(file->Sync());
  }
  return std::unique_ptr<OrderLog>(new OrderLog(std::move(file), scan.config, scan.good_records));
}

absl::StatusOr<RunConfig> OrderLog::Scan(FileSystem* fs, const std::string& path,
                                         const ReplayFn& replay) {
  TOKIMQ_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs->Open(path, OpenMode::kReadOnly));
  TOKIMQ_ASSIGN_OR_RETURN(ScanResult scan, ScanFile(file.get(), /*strict=*/false, replay));
  return scan.config;
}

uint64_t OrderLog::Append(const OrderRecord& rec) {
  std::string encoded = EncodeRecord(rec);
  std::lock_guard<std::mutex> lock(mu_);
  buffer_.append(encoded);
  return ++appended_seq_;
}

absl::Status OrderLog::Sync(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  while (durable_seq_ < seq) {
    if (!failed_.ok()) return failed_;
    if (writing_) {
      cv_.wait(lock);
      continue;
    }
    // This thread becomes the writer for everything buffered so far.
    writing_ = true;
    std::string batch;
    batch.swap(buffer_);
    const uint64_t target = appended_seq_;
    lock.unlock();
    absl::Status s = batch.empty() ? absl::OkStatus() : file_->Append(batch);
    if (s.ok()) s = file_->Sync();
    lock.lock();
    writing_ = false;
    ++sync_count_;
    if (s.ok()) {
      durable_seq_ = target;
    } else {
      failed_ = s;
    }
    cv_.notify_all();
  }
  return absl::OkStatus();
}

absl::Status OrderLog::SyncAll() {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = appended_seq_;
  }
  return Sync(seq);
}

uint64_t OrderLog::durable_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return durable_seq_;
}

uint64_t OrderLog::sync_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sync_count_;
}

}  // namespace tokimq::order_timeout
