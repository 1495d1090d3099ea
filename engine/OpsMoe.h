// The mixture-of-experts MLP's own operations (issue 16), forward and backward, on one
// device: the router's top-k, the load-balancing loss, and the permutation that dispatches
// token copies to experts and combines the expert outputs back. The expert FFNs themselves are
// the ordinary matmul and activation kernels run on each expert's contiguous slice of tokens.
//
// Layouts are the engine's: column-major, one column per token. E experts, K = top-k,
// N tokens, C hidden. Routing follows Megatron-LM's router at d98e8a64
// (megatron/core/transformer/moe/moe_utils.py: topk_routing_with_score_function,
// compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func):
//   softmax, normalised   top-k of the logits, then the softmax over the K chosen ones
//            (Megatron's default, use_pre_softmax off; equal to Mixtral's softmax-then-renormalise)
//   softmax, not normalised   the softmax over all E, then its top-k as they are
//            (use_pre_softmax on)
//   sigmoid  s = sigmoid(logits); top-k of s (+ the expert bias, for the choice only: DeepSeek-V3's
//            noaux_tc); normalised: s_k / (sum of the K chosen s + 1e-20) when K > 1, else s_k
//   both     times the scaling factor (DeepSeek-V3's routed_scaling_factor; 1 otherwise)
// Group-limited (DeepSeek-V3's node-limited routing; Megatron's --moe-router-num-groups G,
// --moe-router-group-topk g, moe_utils.py group_limited_topk): the E experts in G equal groups of
// consecutive indices, each group scored by the sum of its best K / g choice scores; the top K
// experts are chosen within the token's best g groups only.
// Ties choose the lower expert (and group) index, so routing is deterministic.
// Load balancing (Switch Transformer; Megatron's switch_load_balancing_loss_func):
//   aux = coeff * E / (K * T^2) * sum_e tokens_e * sum_n p(e, n)
//   p: the softmax over all E logits (softmax router) or the sigmoid normalised over all E
//   (sigmoid router); tokens_e: the token copies routed to expert e; T: the tokens.
// Dispatch (Megatron's permute): the N K copies sorted by expert, then by token, then by k;
// slot s of the permuted block holds copy order[s] = n K + k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardscope::engine {

enum class RouterScore { Softmax, Sigmoid };

struct RouterSpec {
    int experts = 0;            // E
    int top_k = 0;              // K
    RouterScore score = RouterScore::Softmax;
    double scaling = 1.0;       // routed_scaling_factor
    bool normalize = true;      // the K weights renormalised (core's MoeRouter *Norm kinds)
    int groups = 0;             // G expert groups for group-limited routing (0: none), at most 64
    int group_top_k = 0;        // g groups a token may choose from
};

// Per token n: the chosen experts top_idx[n K + k] (best first), their weights top_w[n K + k];
// `expert_bias` (E values, may be null) shifts the choice only. logits (E, N).
// Throws std::invalid_argument for K outside [1, E] or groups that do not divide E, g outside
// [1, G], or g groups too few to hold K experts.
template <class T>
void router_topk_forward(const RouterSpec& r, const T* logits, std::int64_t N, const T* expert_bias, int* top_idx,
                         T* top_w);
// d logits (E, N), overwritten, from d top_w (K values a token), with the forward's choice.
template <class T>
void router_topk_backward(const RouterSpec& r, const T* logits, std::int64_t N, const int* top_idx, const T* top_w,
                          const T* dtop_w, T* dlogits);

// The copies routed to each expert (E values) from the choice.
std::vector<std::int64_t> tokensPerExpert(const int* top_idx, std::int64_t N, int K, int E);

// The counts the load-balancing loss is of: Megatron's compute_routing_scores_for_aux_loss takes
// the plain top k of the scores, without the expert bias and the group limit (router.py @
// d98e8a64, routing): with neither, the choice's own counts.
template <class T>
std::vector<std::int64_t> tokensPerExpertForAuxLoss(const RouterSpec& r, const T* logits, std::int64_t N);

// The load-balancing loss of the logits (E, N) with those counts, and (when dlogits is not
// null) its gradient added to dlogits, times dloss. total_tokens: T of the formula, the tokens
// the counts are of (0: N; more when the counts are summed over ranks holding the other tokens,
// Megatron's total_num_tokens over the tp x cp group).
template <class T>
double aux_loss_forward_backward(const RouterSpec& r, const T* logits, std::int64_t N,
                                 const std::vector<std::int64_t>& tokens_per_expert, double coeff, T dloss,
                                 T* dlogits, std::int64_t total_tokens = 0);

// The dispatch order of the N K copies (see above), and for each copy its slot.
struct MoePermutation {
    std::vector<std::int64_t> order;   // slot -> copy (n K + k)
    std::vector<std::int64_t> slot;    // copy -> slot
    std::vector<std::int64_t> offsets; // E + 1: expert e's copies are slots [offsets[e], offsets[e+1])
};
MoePermutation permuteByExpert(const int* top_idx, std::int64_t N, int K, int E);

// out (C, N K): slot s = in's column of copy order[s]'s token.
template <class T>
void moe_dispatch_forward(const MoePermutation& p, int K, const T* in, std::int64_t C, T* out);
// din (C, N) += the slots' gradients, summed per token in slot order.
template <class T>
void moe_dispatch_backward(const MoePermutation& p, int K, const T* dout, std::int64_t C, T* din);
// out (C, N) = sum_k top_w[n K + k] * expert_out(slot of n K + k), k in order (overwritten);
// top_w null: the plain sum (the weights applied at the experts, MoeMlp).
template <class T>
void moe_combine_forward(const MoePermutation& p, int K, const T* expert_out, const T* top_w, std::int64_t C,
                         std::int64_t N, T* out);
// d expert_out (C, N K) and d top_w (N K), overwritten, from d out (C, N); top_w null: the
// unweighted combine's (expert_out and dtop_w unused).
template <class T>
void moe_combine_backward(const MoePermutation& p, int K, const T* dout, const T* expert_out, const T* top_w,
                          std::int64_t C, std::int64_t N, T* dexpert_out, T* dtop_w);

} // namespace shardscope::engine
