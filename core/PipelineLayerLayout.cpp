#include "PipelineLayerLayout.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace shardscope {

namespace {

// Expanded layouts longer than this are refused (a typed "t*99999999" must not eat the memory; a
// layout of 10,000 layers and chunks is beyond any model trained).
constexpr size_t kMaxExpandedItems = 10'000;

std::string s(long long n) { return std::to_string(n); }

// Reads the decimal count after a '*' at `at` (pointing at the '*'); advances past it.
bool readCount(const std::string& text, size_t& at, long long& count)
{
    size_t i = at + 1;
    count = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        count = count * 10 + (text[i] - '0');
        if (count > static_cast<long long>(kMaxExpandedItems))
            return false;
        ++i;
    }
    if (i == at + 1)
        return false;
    at = i;
    return true;
}

bool append(std::string& out, const std::string& piece, long long times, std::string& error)
{
    if (times > 0 && piece.size() > (kMaxExpandedItems - out.size()) / size_t(times)) {
        error = "expands to more than " + s(static_cast<long long>(kMaxExpandedItems)) + " items";
        return false;
    }
    for (long long i = 0; i < times; ++i)
        out += piece;
    return true;
}

}  // namespace

std::optional<PipelineLayerLayout> PipelineLayerLayout::parse(const std::string& given, std::string& error)
{
    std::string text;
    for (char c : given)
        if (c != ',')
            text += c;
    if (text.empty()) {
        error = "an empty layout (Megatron-LM's form: \"Et*4|(t*4|)*14tmL\")";
        return std::nullopt;
    }
    // Pass 1, as Megatron's first pattern \(([^)]+)\)*(\d+): each "(...)*N" unrolled.
    std::string unrolled;
    for (size_t i = 0; i < text.size();) {
        if (text[i] == ')') {
            error = "a ')' without its '(' at character " + s(static_cast<long long>(i + 1));
            return std::nullopt;
        }
        if (text[i] != '(') {
            unrolled += text[i++];
            continue;
        }
        const size_t close = text.find(')', i + 1);
        if (close == std::string::npos) {
            error = "a '(' without its ')' at character " + s(static_cast<long long>(i + 1));
            return std::nullopt;
        }
        const std::string inner = text.substr(i + 1, close - i - 1);
        if (inner.empty() || inner.find('(') != std::string::npos) {
            error = inner.empty() ? "an empty group \"()\"" : "nested parentheses (Megatron-LM's parser unrolls one level)";
            return std::nullopt;
        }
        size_t at = close + 1;
        long long times = 0;
        if (at >= text.size() || text[at] != '*' || !readCount(text, at, times)) {
            error = "a group \"(" + inner + ")\" must be followed by *N, a count up to " +
                    s(static_cast<long long>(kMaxExpandedItems));
            return std::nullopt;
        }
        if (!append(unrolled, inner, times, error))
            return std::nullopt;
        i = at;
    }
    // Pass 2, Megatron's (.)\*(\d+): an item (or '|') followed by *N repeated.
    std::string expanded;
    for (size_t i = 0; i < unrolled.size();) {
        const char item = unrolled[i];
        if (item == '*') {
            error = "a '*' with nothing to repeat";
            return std::nullopt;
        }
        size_t at = i + 1;
        long long times = 1;
        if (at < unrolled.size() && unrolled[at] == '*' && !readCount(unrolled, at, times)) {
            error = "'" + std::string(1, item) + "*' must be followed by a count up to " + s(static_cast<long long>(kMaxExpandedItems));
            return std::nullopt;
        }
        if (!append(expanded, std::string(1, item), times, error))
            return std::nullopt;
        i = at;
    }

    PipelineLayerLayout out;
    out.text_ = text;
    out.chunks_.emplace_back();
    for (size_t i = 0; i < expanded.size(); ++i) {
        const char c = expanded[i];
        PipelineChunkContents& chunk = out.chunks_.back();
        const bool opens = i == 0 || expanded[i - 1] == '|';
        const bool closes = i + 1 == expanded.size() || expanded[i + 1] == '|';
        switch (c) {
        case '|': out.chunks_.emplace_back(); break;
        case 't':
            ++chunk.layers;
            if (chunk.mtp_layers > 0)
                chunk.mtp_before_layer = true;
            break;
        case 'm': ++chunk.mtp_layers; break;
        case 'E':
            if (chunk.embedding) {
                error = "the embedding E appears twice";
                return std::nullopt;
            }
            chunk.embedding = true;
            chunk.embedding_first = opens;
            break;
        case 'L':
            if (chunk.loss) {
                error = "the loss L appears twice";
                return std::nullopt;
            }
            chunk.loss = true;
            chunk.loss_last = closes;
            break;
        default:
            error = "unknown item '" + std::string(1, c) + "' (known: E embedding, L loss, t transformer layer, m MTP "
                    "layer; '|' between chunks, (...)*N and x*N repeat)";
            return std::nullopt;
        }
    }
    return out;
}

int PipelineLayerLayout::total(int PipelineChunkContents::*count) const
{
    int n = 0;
    for (const PipelineChunkContents& c : chunks_)
        n += c.*count;
    return n;
}

int PipelineLayerLayout::stageLayers(int pp, int stage) const
{
    if (pp < 1 || stage < 0)
        return 0;
    int n = 0;
    for (int k = stage; k < chunkCount(); k += pp)
        n += chunks_[size_t(k)].layers;
    return n;
}

int PipelineLayerLayout::chunkFirstLayer(int pp, int stage, int vchunk) const
{
    int offset = 0;
    const long long end = static_cast<long long>(vchunk) * pp + stage;
    for (int k = 0; k < end && k < chunkCount(); ++k)
        offset += chunks_[size_t(k)].layers;
    return offset;
}

int PipelineLayerLayout::largestChunkLayers(int pp, int stage) const
{
    if (pp < 1 || stage < 0)
        return 0;
    int most = 0;
    for (int k = stage; k < chunkCount(); k += pp)
        most = std::max(most, chunks_[size_t(k)].layers);
    return most;
}

std::vector<std::string> PipelineLayerLayout::problems(int pp, int layers, int mtpLayers) const
{
    std::vector<std::string> out;
    if (pp < 1 || chunkCount() % pp != 0) {
        out.push_back("its " + s(chunkCount()) + " model chunks are not a multiple of pp = " + s(pp) +
                      " (Megatron-LM: the layout's length must be divisible by pipeline_model_parallel_size)");
        return out;
    }
    const PipelineChunkContents& first = chunks_.front();
    const PipelineChunkContents& last = chunks_.back();
    int embeddings = 0, losses = 0;
    for (const PipelineChunkContents& c : chunks_) {
        embeddings += c.embedding ? 1 : 0;
        losses += c.loss ? 1 : 0;
    }
    if (embeddings == 0 || !first.embedding || !first.embedding_first)
        out.push_back("the embedding E must open the first chunk (Megatron-LM: \"The first layer must be embedding\")");
    if (losses == 0 || !last.loss || !last.loss_last)
        out.push_back("the loss L must close the last chunk (Megatron-LM: \"The last layer must be loss\")");
    if (transformerLayers() != layers)
        out.push_back("it holds " + s(transformerLayers()) + " transformer layers t; the model has " + s(layers));
    if (this->mtpLayers() != mtpLayers)
        out.push_back("it holds " + s(this->mtpLayers()) + " MTP layers m; the model has " + s(mtpLayers) +
                      " (Megatron-LM: \"Number of mtp layers in layout must match mtp_num_layers\")");
    bool mtpSeen = false;
    for (int k = 0; k < chunkCount(); ++k) {
        const PipelineChunkContents& c = chunks_[size_t(k)];
        if ((mtpSeen && c.layers > 0) || c.mtp_before_layer) {
            out.push_back("transformer layers after an MTP layer (Megatron-LM: \"decoder layers must be placed before "
                          "MTP layers\")");
            break;
        }
        mtpSeen = mtpSeen || c.mtp_layers > 0;
        if (c.mtp_layers > 0 && k != chunkCount() - 1) {
            out.push_back("MTP layers in chunk " + s(k + 1) + " of " + s(chunkCount()) +
                          ": here they run with the loss in the last chunk of the last stage (Megatron-LM's standalone "
                          "MTP on another stage is not modelled)");
            break;
        }
    }
    for (int stage = 0; stage < pp; ++stage)
        if (stageLayers(pp, stage) < 1) {
            out.push_back("pipeline stage " + s(stage) + " holds no transformer layer (a stage of the embedding or "
                          "loss alone is not modelled)");
            break;
        }
    return out;
}

namespace {

struct LayoutTable {
    std::mutex mutex;
    std::unordered_map<std::string, std::weak_ptr<const PipelineLayerLayout>> byText;
    size_t sweepAt = 64;  // the size at which expired entries are dropped next
};

LayoutTable& table()
{
    static LayoutTable instance;
    return instance;
}

}  // namespace

PipelineLayoutRef internPipelineLayerLayout(const PipelineLayerLayout& layout)
{
    LayoutTable& t = table();
    std::lock_guard lock(t.mutex);
    std::weak_ptr<const PipelineLayerLayout>& slot = t.byText[layout.text()];
    if (PipelineLayoutRef held = slot.lock())
        return held;
    PipelineLayoutRef made = std::make_shared<const PipelineLayerLayout>(layout);
    slot = made;
    if (t.byText.size() >= t.sweepAt) {
        std::erase_if(t.byText, [](const auto& entry) { return entry.second.expired(); });
        t.sweepAt = std::max<size_t>(64, 2 * t.byText.size());
    }
    return made;
}

}  // namespace shardscope
