// Token sources: the seeded Markov chain (transition table, stationary
// distribution by power iteration, entropy rate) and byte-level files.
#include "Data.h"

#include "Random.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope::engine {

MarkovSource::MarkovSource(int vocab, std::uint64_t seed, int branching)
    : vocab_(vocab), k_(std::clamp(branching, 1, std::max(1, vocab))), seed_(seed)
{
    if (vocab < 1)
        throw InputError("vocab: must be at least 1");
    const int V = vocab_, k = k_;
    next_.assign(size_t(V) * k, 0);
    cum_.assign(size_t(V) * k, 0);
    Rng rng(hash64(seed, 0x4D41524Bull));  // "MARK"
    for (int i = 0; i < V; ++i) {
        int* succ = &next_[size_t(i) * k];
        int count = 0;
        auto add = [&](int j) {
            if (count < k && std::find(succ, succ + count, j) == succ + count)
                succ[count++] = j;
        };
        add(i);
        add((i + 1) % V);
        while (count < k)
            add(int(rng.below(std::uint32_t(V))));
        // Dirichlet(1, ..., 1): normalised exponential draws.
        double total = 0;
        std::vector<double> weights(static_cast<size_t>(k));
        for (int j = 0; j < k; ++j)
            total += (weights[size_t(j)] = -std::log(1.0 - rng.uniform()) + 1e-3);
        double c = 0;
        for (int j = 0; j < k; ++j)
            cum_[size_t(i) * k + j] = (c += weights[size_t(j)] / total);
        cum_[size_t(i) * k + k - 1] = 1.0;
    }
    // Stationary distribution by power iteration (converges: aperiodic, irreducible).
    pi_.assign(size_t(V), 1.0 / V);
    std::vector<double> nextPi(static_cast<size_t>(V));
    for (int it = 0; it < 100000; ++it) {
        std::fill(nextPi.begin(), nextPi.end(), 0.0);
        for (int i = 0; i < V; ++i) {
            double prev = 0;
            for (int j = 0; j < k; ++j) {
                const double p = cum_[size_t(i) * k + j] - prev;
                prev = cum_[size_t(i) * k + j];
                nextPi[size_t(next_[size_t(i) * k + j])] += pi_[size_t(i)] * p;
            }
        }
        double diff = 0;
        for (int i = 0; i < V; ++i)
            diff += std::fabs(nextPi[size_t(i)] - pi_[size_t(i)]);
        pi_.swap(nextPi);
        if (diff < 1e-13)
            break;
    }
    piCum_.resize(size_t(V));
    double c = 0, h = 0;
    for (int i = 0; i < V; ++i) {
        piCum_[size_t(i)] = (c += pi_[size_t(i)]);
        double prev = 0, rowEntropy = 0;
        for (int j = 0; j < k; ++j) {
            const double p = cum_[size_t(i) * k + j] - prev;
            prev = cum_[size_t(i) * k + j];
            if (p > 0)
                rowEntropy -= p * std::log(p);
        }
        h += pi_[size_t(i)] * rowEntropy;
    }
    piCum_.back() = 1.0;
    entropy_ = h;
}

std::vector<std::pair<int, double>> MarkovSource::row(int i) const
{
    std::vector<std::pair<int, double>> r;
    double prev = 0;
    for (int j = 0; j < k_; ++j) {
        r.emplace_back(next_[size_t(i) * k_ + j], cum_[size_t(i) * k_ + j] - prev);
        prev = cum_[size_t(i) * k_ + j];
    }
    return r;
}

int MarkovSource::sample(int state, double u) const
{
    const double* c = &cum_[size_t(state) * k_];
    int j = 0;
    while (j < k_ - 1 && u >= c[j])
        ++j;
    return next_[size_t(state) * k_ + j];
}

void MarkovSource::rows(std::int64_t index, int first, int count, int T, int* inputs, int* targets) const
{
    for (int b = 0; b < count; ++b) {
        Rng rng(hash64(seed_, std::uint64_t(index), std::uint64_t(first + b)));
        const double u = rng.uniform();
        int x = int(std::upper_bound(piCum_.begin(), piCum_.end(), u) - piCum_.begin());  // first with cum > u
        x = std::min(x, vocab_ - 1);
        for (int t = 0; t < T; ++t) {
            inputs[size_t(b) * T + t] = x;
            x = sample(x, rng.uniform());
            targets[size_t(b) * T + t] = x;
        }
    }
}

FieldErrors MarkovSource::check(int vocab, int) const
{
    if (vocab != vocab_)
        return {{"vocab", "the synthetic source has " + std::to_string(vocab_) + " tokens, the model " +
                              std::to_string(vocab)}};
    return {};
}

std::string MarkovSource::description() const
{
    char text[160];
    std::snprintf(text, sizeof text, "synthetic Markov chain over %d tokens, %d successors each, entropy %.4f nats/token",
                  vocab_, k_, entropy_);
    return text;
}

ByteFileSource::ByteFileSource(const std::string& path, std::uint64_t seed) : path_(path), seed_(seed)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw InputError("data: cannot read \"" + path + "\": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        throw InputError("data: \"" + path + "\" is a directory; give a file whose bytes are the tokens");
    if (!S_ISREG(st.st_mode))
        throw InputError("data: \"" + path + "\" is not a regular file (a FIFO, socket or device); give a file");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
        throw InputError("data: cannot read \"" + path + "\": " + std::strerror(errno));
    size_ = std::size_t(st.st_size);
}

ByteFileSource::~ByteFileSource()
{
    if (fd_ >= 0)
        ::close(fd_);
}

void ByteFileSource::rows(std::int64_t index, int first, int count, int T, int* inputs, int* targets) const
{
    const std::uint64_t windows = size_ - size_t(T);  // start offsets 0 .. size-T-1 (check() ensured > 0)
    std::vector<unsigned char> window(size_t(T) + 1);
    for (int b = 0; b < count; ++b) {
        Rng rng(hash64(seed_, std::uint64_t(index), std::uint64_t(first + b)));
        const std::uint64_t start = (rng.next() >> 11) % windows;
        std::size_t got = 0;
        while (got < window.size()) {
            const ssize_t n = ::pread(fd_, window.data() + got, window.size() - got, off_t(start + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                throw std::runtime_error("data: cannot read \"" + path_ + "\" at byte " + std::to_string(start + got) +
                                         ": " + (n < 0 ? std::strerror(errno) : "the file is shorter than it was"));
            got += std::size_t(n);
        }
        for (int t = 0; t < T; ++t) {
            inputs[size_t(b) * T + t] = window[size_t(t)];
            targets[size_t(b) * T + t] = window[size_t(t) + 1];
        }
    }
}

FieldErrors ByteFileSource::check(int vocab, int seq) const
{
    FieldErrors e;
    if (vocab < 256)
        e.push_back({"vocab", std::to_string(vocab) + " is too small for byte-level data (needs at least 256)"});
    if (size_ < size_t(seq) + 1)
        e.push_back({"data", "\"" + path_ + "\" has " + std::to_string(size_) +
                                 " bytes, fewer than seq + 1 = " + std::to_string(seq + 1)});
    return e;
}

std::string ByteFileSource::description() const
{
    return "bytes of " + path_ + " (" + std::to_string(size_) + " bytes)";
}

} // namespace shardscope::engine
