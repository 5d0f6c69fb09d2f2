// Opens a RocksDB store the way an application does and prints its records.
//
// rocksdb::DB::Open(options, path, &db) with default options (create_if_missing is
// false) and so the DEFAULT column family only: RocksDB refuses a store that has any
// other column family ("Column families not opened: ..."), as an app that was never
// told about it would. Every key/value of the default column family is printed as one
// line "KEYHEX VALUEHEX" (lower-case hex, empty for an empty byte string), in the
// iterator's order. Exit 0; on any failure the status goes to stderr and the exit is 1.
//
// Built by tests/apps.py against Debian's librocksdb-dev: g++ -std=c++17 ... -lrocksdb
#include <cstdio>
#include <memory>
#include <string>

#include <rocksdb/db.h>
#include <rocksdb/options.h>

static void put_hex(const rocksdb::Slice& s, std::string* out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s.data()[i]);
    out->push_back(digits[c >> 4]);
    out->push_back(digits[c & 15]);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s STORE_DIR\n", argv[0]);
    return 2;
  }
  rocksdb::Options options;  // the defaults: create_if_missing = false
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(options, argv[1], &raw);
  if (!status.ok()) {
    std::fprintf(stderr, "DB::Open: %s\n", status.ToString().c_str());
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  std::string line;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    line.clear();
    put_hex(it->key(), &line);
    line.push_back(' ');
    put_hex(it->value(), &line);
    line.push_back('\n');
    if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size()) {
      std::fprintf(stderr, "write to stdout failed\n");
      return 1;
    }
  }
  if (!it->status().ok()) {
    std::fprintf(stderr, "iterator: %s\n", it->status().ToString().c_str());
    return 1;
  }
  it.reset();
  status = db->Close();
  if (!status.ok()) {
    std::fprintf(stderr, "Close: %s\n", status.ToString().c_str());
    return 1;
  }
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "flush of stdout failed\n");
    return 1;
  }
  return 0;
}
