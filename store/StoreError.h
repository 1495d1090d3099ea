// StoreError: a failure of the database that is not the user's input — I/O, a file
// we must not touch (newer schema, another program's database). The CLI exits 1 on it.
// The kind lets a caller tell "try again later" (Busy) from "free some space" (DiskFull)
// from "choose another file" without parsing the text; the text always says it too.
#pragma once

#include <stdexcept>

namespace shardscope {

class StoreError : public std::runtime_error {
public:
    enum class Kind {
        Other,
        Busy,       // another process holds the file locked longer than the wait allowed
        DiskFull,   // no space left on the disk that holds the file
        ReadOnly,   // the file or its folder cannot be written
        Damaged,    // the file claims the current schema but lacks a table or column
    };
    explicit StoreError(const std::string& message, Kind kind = Kind::Other)
        : std::runtime_error(message), kind_(kind) {}
    Kind kind() const { return kind_; }

private:
    Kind kind_;
};

} // namespace shardscope
