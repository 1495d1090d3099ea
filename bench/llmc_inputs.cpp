// Input files for llm.c's CPU trainer (train_gpt2.c), written without Python or a download,
// for bench/llmc-compare.sh. In DIR it writes what train_gpt2's main opens from its working
// directory:
//   DIR/gpt2_124M.bin                                     a GPT-2 checkpoint, random weights
//   DIR/dev/data/tinyshakespeare/tiny_shakespeare_train.bin  synthetic tokens
//   DIR/dev/data/tinyshakespeare/tiny_shakespeare_val.bin    synthetic tokens
// Formats (as read by gpt2_build_from_checkpoint in train_gpt2.c and dataloader_load_shard_
// in llmc/dataloader.h, llm.c commit f1e2ace):
//   checkpoint: 256 int32 header {20240326 (magic), 3 (version: fp32), max_seq_len, vocab_size,
//               num_layers, num_heads, channels, padded_vocab_size, 0...}, then the fp32
//               parameters in the order wte (Vp*C), wpe (maxT*C), ln1w, ln1b, qkvw, qkvb,
//               attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb (each L*...), lnfw, lnfb.
//   tokens:     256 int32 header {20240520 (magic), 1 (version), token count, 0...}, then uint16 tokens.
// Weights follow GPT-2's initialisation (normal 0.02, residual projections 0.02/sqrt(2L),
// LayerNorm scale 1, biases 0); the values do not matter for the step's time, only that they
// are ordinary floats. Tokens are uniform over the vocabulary.
//   llmc_inputs DIR [TOKENS_PER_FILE]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kMaxT = 1024, kVocab = 50257, kPaddedVocab = 50304, kLayers = 12, kHeads = 12, kChannels = 768;

bool writeAll(std::FILE* f, const void* data, size_t size, size_t count)
{
    return std::fwrite(data, size, count, f) == count;
}

bool writeCheckpoint(const std::string& path)
{
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    int header[256] = {};
    header[0] = 20240326;
    header[1] = 3;
    header[2] = kMaxT;
    header[3] = kVocab;
    header[4] = kLayers;
    header[5] = kHeads;
    header[6] = kChannels;
    header[7] = kPaddedVocab;
    bool ok = writeAll(f, header, sizeof(int), 256);

    const size_t C = kChannels, L = kLayers;
    const float sigma = 0.02f, residualSigma = 0.02f / std::sqrt(2.0f * kLayers);
    enum Fill { Normal, Residual, Ones, Zeros };
    struct Tensor {
        size_t size;
        Fill fill;
    };
    const Tensor tensors[] = {
        {size_t(kPaddedVocab) * C, Normal}, // wte
        {size_t(kMaxT) * C, Normal},        // wpe
        {L * C, Ones},                      // ln1w
        {L * C, Zeros},                     // ln1b
        {L * 3 * C * C, Normal},            // qkvw
        {L * 3 * C, Zeros},                 // qkvb
        {L * C * C, Residual},              // attprojw
        {L * C, Zeros},                     // attprojb
        {L * C, Ones},                      // ln2w
        {L * C, Zeros},                     // ln2b
        {L * 4 * C * C, Normal},            // fcw
        {L * 4 * C, Zeros},                 // fcb
        {L * C * 4 * C, Residual},          // fcprojw
        {L * C, Zeros},                     // fcprojb
        {C, Ones},                          // lnfw
        {C, Zeros},                         // lnfb
    };
    std::mt19937 rng(1337);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> buf;
    for (const Tensor& t : tensors) {
        buf.resize(t.size);
        for (float& x : buf) {
            switch (t.fill) {
            case Normal: x = sigma * normal(rng); break;
            case Residual: x = residualSigma * normal(rng); break;
            case Ones: x = 1.0f; break;
            case Zeros: x = 0.0f; break;
            }
        }
        ok = ok && writeAll(f, buf.data(), sizeof(float), buf.size());
    }
    return std::fclose(f) == 0 && ok;
}

bool writeTokens(const std::string& path, int count, unsigned seed)
{
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    int header[256] = {};
    header[0] = 20240520;
    header[1] = 1;
    header[2] = count;
    bool ok = writeAll(f, header, sizeof(int), 256);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> token(0, kVocab - 1);
    std::vector<uint16_t> tokens(static_cast<size_t>(count));
    for (uint16_t& t : tokens) t = uint16_t(token(rng));
    ok = ok && writeAll(f, tokens.data(), sizeof(uint16_t), tokens.size());
    return std::fclose(f) == 0 && ok;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: %s DIR [TOKENS_PER_FILE]\n", argv[0]);
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    // Default: 64 batches of B*T = 4*64 tokens, plus the one extra target token.
    const int tokens = argc > 2 ? std::atoi(argv[2]) : 64 * 256 + 1;
    if (tokens < 4 * 64 + 1) {
        std::fprintf(stderr, "TOKENS_PER_FILE must be at least %d (one batch of 4 x 64, plus one)\n", 4 * 64 + 1);
        return 2;
    }
    const std::filesystem::path data = dir / "dev" / "data" / "tinyshakespeare";
    std::error_code ec;
    std::filesystem::create_directories(data, ec);
    if (ec) {
        std::fprintf(stderr, "cannot create %s: %s\n", data.c_str(), ec.message().c_str());
        return 1;
    }
    const std::string checkpoint = (dir / "gpt2_124M.bin").string();
    const std::string train = (data / "tiny_shakespeare_train.bin").string();
    const std::string val = (data / "tiny_shakespeare_val.bin").string();
    if (!writeCheckpoint(checkpoint)) {
        std::fprintf(stderr, "cannot write %s\n", checkpoint.c_str());
        return 1;
    }
    if (!writeTokens(train, tokens, 1) || !writeTokens(val, tokens, 2)) {
        std::fprintf(stderr, "cannot write the token files in %s\n", data.c_str());
        return 1;
    }
    std::printf("wrote %s and %d tokens each to %s, %s\n", checkpoint.c_str(), tokens, train.c_str(), val.c_str());
    return 0;
}
