// Token sources for training, deterministic under a seed: batch i is the same
// whatever happened before it (each row is drawn from hash64(seed, i, row)), so
// runs are reproducible and a data-parallel replica can take its own rows.
//
// - MarkovSource: a seeded first-order Markov chain over the vocabulary with a
//   known entropy rate H = sum_i pi_i H(row_i) (pi the stationary distribution).
//   Every sequence starts from pi, so every position's conditional entropy is H:
//   the best possible mean loss, the floor a learning curve approaches.
// - ByteFileSource: a user's file, one token per byte (vocab >= 256), random
//   windows of T+1 bytes.
#pragma once

#include "FieldError.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::engine {

class TokenSource {
public:
    virtual ~TokenSource() = default;
    // inputs, targets: B*T tokens each; targets are the inputs shifted by one.
    void batch(std::int64_t index, int B, int T, int* inputs, int* targets) const
    {
        rows(index, 0, B, T, inputs, targets);
    }
    // Rows [first, first + count) of batch `index` (count*T tokens each): row b of a batch is
    // drawn from (seed, index, b) alone, so a data-parallel replica draws only its own rows.
    virtual void rows(std::int64_t index, int first, int count, int T, int* inputs, int* targets) const = 0;
    // Problems with using this source for a model (field "data" or "vocab").
    virtual FieldErrors check(int vocab, int seq) const = 0;
    virtual std::string description() const = 0;
    // The loss floor in nats per token, when known.
    virtual std::optional<double> entropyNatsPerToken() const { return std::nullopt; }
};

class MarkovSource : public TokenSource {
public:
    // Each state i moves to itself, to i+1 (mod V) and to `branching` - 2 other
    // random states (fewer when V is small), with Dirichlet(1) random probabilities.
    // The self-loop makes the chain aperiodic and the ring irreducible, so the
    // stationary distribution exists and is unique.
    MarkovSource(int vocab, std::uint64_t seed, int branching = 4);

    void rows(std::int64_t index, int first, int count, int T, int* inputs, int* targets) const override;
    FieldErrors check(int vocab, int seq) const override;
    std::string description() const override;
    std::optional<double> entropyNatsPerToken() const override { return entropy_; }

    int vocab() const { return vocab_; }
    const std::vector<double>& stationary() const { return pi_; }
    // Successors and probabilities of state i (for tests).
    std::vector<std::pair<int, double>> row(int i) const;

private:
    int sample(int state, double u) const;

    int vocab_;
    int k_;                       // successors per state
    std::uint64_t seed_;
    std::vector<int> next_;       // (V, k) successor ids
    std::vector<double> cum_;     // (V, k) cumulative probabilities
    std::vector<double> pi_;      // stationary distribution
    std::vector<double> piCum_;
    double entropy_ = 0;          // nats per token
};

class ByteFileSource : public TokenSource {
public:
    // Opens the file and reads only its size: each batch reads its windows from the file
    // (pread, safe from every worker thread), so a file of any size costs no memory. Throws
    // InputError naming "data" when the path cannot be read or is not a regular file (a
    // directory, a FIFO, a device such as /dev/zero: never opened, so a FIFO cannot block).
    ByteFileSource(const std::string& path, std::uint64_t seed);
    ~ByteFileSource() override;
    ByteFileSource(const ByteFileSource&) = delete;
    ByteFileSource& operator=(const ByteFileSource&) = delete;

    // Throws std::runtime_error naming the file when a read fails (the file shrank or the disk failed).
    void rows(std::int64_t index, int first, int count, int T, int* inputs, int* targets) const override;
    FieldErrors check(int vocab, int seq) const override;
    std::string description() const override;
    std::size_t size() const { return size_; }

private:
    std::string path_;
    std::uint64_t seed_;
    int fd_ = -1;
    std::size_t size_ = 0;
};

} // namespace shardscope::engine
