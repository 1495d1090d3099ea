// StoreError: a failure of the database that is not the user's input — I/O, a file
// we must not touch (newer schema, another program's database). The CLI exits 1 on it.
#pragma once

#include <stdexcept>

namespace shardscope {

class StoreError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace shardscope
