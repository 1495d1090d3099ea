// PipelineLayerLayout: an explicit assignment of layers to pipeline model chunks, as Megatron-LM's
// --pipeline-model-parallel-layout takes it (megatron/core/transformer/pipeline_parallel_layer_layout.py
// @ d98e8a64, PipelineParallelLayerLayout): "Et*4|(t*4|)*14tmL" is 16 chunks, the first with the
// embedding and 4 transformer layers, 14 of 4, the last with 1 layer, the MTP module and the loss.
// E, L, t and m are the embedding, the loss, a transformer (decoder) layer and an MTP layer; '|'
// separates chunks; "(...)*N" and "x*N" repeat; commas are cosmetic. Chunk k of pp x v runs on
// pipeline rank k % pp as its virtual chunk k / pp (the layer-id order walks the chunks so).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct PipelineChunkContents {
    int layers = 0;          // transformer layers ('t')
    int mtp_layers = 0;      // MTP layers ('m')
    bool embedding = false;  // 'E'
    bool loss = false;       // 'L'
    bool embedding_first = false;  // 'E' is the chunk's first item
    bool loss_last = false;        // 'L' is the chunk's last item
    bool mtp_before_layer = false; // an 'm' precedes a 't' in this chunk
};

class PipelineLayerLayout {
public:
    // Megatron's string (parse_str_to_list: parentheses unrolled first, then single items; no
    // nesting). Empty on a malformed string, with the reason in `error`.
    static std::optional<PipelineLayerLayout> parse(const std::string& text, std::string& error);

    // The string with its cosmetic commas dropped (a layout's text form uses commas between keys).
    const std::string& text() const { return text_; }
    int chunkCount() const { return int(chunks_.size()); }
    // Chunk `index` in layer-id order (Megatron's flat list).
    const PipelineChunkContents& chunk(int index) const { return chunks_[size_t(index)]; }
    // Chunk `vchunk` of pipeline rank `stage` among pp ranks (index vchunk x pp + stage).
    const PipelineChunkContents& chunk(int pp, int stage, int vchunk) const { return chunk(vchunk * pp + stage); }
    int transformerLayers() const { return total(&PipelineChunkContents::layers); }
    int mtpLayers() const { return total(&PipelineChunkContents::mtp_layers); }

    // For pp stages (chunkCount() divisible by pp): a stage's transformer layers, a chunk's, and the
    // id of a chunk's first layer (get_layer_offset: every earlier chunk's layers).
    int stageLayers(int pp, int stage) const;
    int chunkLayers(int pp, int stage, int vchunk) const
    {
        const long long index = static_cast<long long>(vchunk) * pp + stage;  // (0 outside the layout: an unchecked one)
        return pp >= 1 && stage >= 0 && stage < pp && vchunk >= 0 && index < chunkCount() ? chunks_[size_t(index)].layers
                                                                                          : 0;
    }
    int chunkFirstLayer(int pp, int stage, int vchunk) const;
    // The most transformer layers any of a stage's chunks holds.
    int largestChunkLayers(int pp, int stage) const;

    // What Megatron-LM's checks (PipelineParallelLayerLayout.__init__ and validate_layer_layout)
    // and this model refuse, for pp stages, a model of `layers` transformer layers and
    // `mtpLayers` MTP depths; empty when none.
    std::vector<std::string> problems(int pp, int layers, int mtpLayers) const;

private:
    int total(int PipelineChunkContents::*count) const;

    std::string text_;
    std::vector<PipelineChunkContents> chunks_;
};

// Layouts hold their pipeline layout by a shared, immutable reference (Layout::pipeline_layout, null:
// none), interned: while any holder keeps one, the same text gives the same object, so a Layout
// compares by its fields (the pointer included) and copies cheaply. The table keeps weak
// references only (swept as it grows), so parsing many layouts does not keep them. Thread-safe.
using PipelineLayoutRef = std::shared_ptr<const PipelineLayerLayout>;
PipelineLayoutRef internPipelineLayerLayout(const PipelineLayerLayout& layout);

}  // namespace shardscope
