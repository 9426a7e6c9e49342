// RocksDbLogger: RocksDB's info log written into the broker's log (spdlog) instead of a LOG
// file in <data_dir>/meta.
//
// Why: RocksDB's own file logger fails for good at the first write that finds the disk full,
// and the librocksdb of the distribution (7.8, built with assertions) then aborts the process
// at the next log line (WritableFileWriter::AssertFalseAndGetStatusForPrevError) — on a full
// disk that was the broker's SIGTERM (a line at DB::Close), or any later RocksDB message. The
// broker's log copes with a full disk like any other log line. RocksDB's INFO and HEADER lines
// go out at debug level (they are many and for RocksDB experts), WARN and above at warn/error.
//
// Thread-safe (spdlog is); shared by the DB for its lifetime.
#pragma once

#include <rocksdb/env.h>

#include <memory>

namespace tokimq::broker {

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger();

}  // namespace tokimq::broker
