// MoeDispatch: how many sends a MoE token costs under the flex dispatchers (DeepEP, HybridEP), link by
// link. Plain inline arithmetic: the cost model calls it once per stage and evaluation.
//
// DeepEP's internode ("normal") kernels (deepseek-ai/DeepEP @ dd758caf, docs/legacy.md: "kernels
// optimized for asymmetric-domain bandwidth forwarding, such as forwarding data from NVLink domain to
// RDMA domain"; csrc/kernels/legacy/internode.cu) and NVIDIA's HybridEP (DeepEP branch hybrid-ep
// @ 94a9f8f6, docs/Hybrid-EP_Implementation.md: "rdma_token_buffer: max_tokens_per_rank x (num_nodes -
// 1) x hidden_dim", one slot per token and remote node) move a token
//   - over the network once to each other node (NVLink domain) that holds at least one of its
//     experts, to the GPU of that node on the sender's rail, through the sender's own NIC;
//   - over NVLink, once to each GPU of its own node that holds one of its experts, and, on the
//     receiving GPU of a remote node, once more to each GPU of that node that holds one;
// a GPU receiving a token once whatever the number of its experts the token chose (DeepEP:
// is_token_in_rank; the copies per local expert are made after the receive, by the permute).
// The combine is the mirror image, the same bytes on the same links.
//
// Expectations, for top-k routing that picks k distinct experts of E uniformly (force-balanced
// routing, as the calibration rows run; group-limited routing below). A bin of B experts (a node's, or a GPU's) is missed by a token when all
// k experts fall outside it: C(E - B, k) / C(E, k) = prod_{i<k} (E - B - i) / (E - i) (sampling without
// replacement; independent picks, the E -> infinity limit, give (1 - B/E)^k, so over N bins of E/N
// experts the expected bins touched N (1 - C(E - E/N, k) / C(E, k)) tend to N (1 - (1 - 1/N)^k)).
// Every bin is touched with the same probability p, so of the N nodes a token touches on average
// N p, the local one with probability p: the remote crossings are (N - 1) p.
#pragma once

#include <algorithm>
#include <cmath>

namespace shardscope {

// Probability that a token's k distinct experts (of `experts`) include one of a bin of `bin` experts.
inline double binTouchedProbability(double experts, double topK, double bin)
{
    if (bin >= experts)
        return 1.0;
    double missed = 1.0;
    for (int i = 0; i < int(topK); ++i)
        missed *= std::max(0.0, experts - bin - i) / (experts - i);
    return 1.0 - missed;
}

// C(n, r) as a double (small arguments: group counts).
inline double choose(double n, double r)
{
    if (r < 0 || r > n)
        return 0.0;
    double c = 1.0;
    for (int i = 0; i < int(r); ++i)
        c *= (n - i) / (i + 1);
    return c;
}

// ... under group-limited routing (DeepSeek-V3's node-limited routing; Megatron-LM's
// --moe-router-num-groups G / --moe-router-group-topk g, moe_utils.py group_limited_topk
// @ d98e8a64): a token first takes the g of G equal groups (S = E / G experts each) whose top k/g
// scores sum highest, then its k experts among those groups' experts. With force-balanced (random)
// scores the chosen groups are a uniform g-subset, and each holds about k/g of the picks, its own top
// k/g: so a bin of b whole groups (a node's experts) is touched when one of its groups is chosen,
// 1 - C(G - b, g) / C(G, g), and a bin of B experts inside one group (a GPU's) when its group is
// chosen and one of the group's k/g picks falls in it, g/G (1 - C(S - B, k/g) / C(S, k/g)). (Checked
// against Megatron's selection on random scores in tst_planner_costmodel: within 0.01 for a
// DeepSeek-V3 node, 0.012 for a GPU.) Bins of other shapes, or k not a multiple of g: the ungrouped
// figure (an upper estimate).
inline double binTouchedProbability(double experts, double topK, double bin, int groups, int groupTopK)
{
    const double perGroup = groups > 0 ? experts / groups : 0.0;
    const int picks = groupTopK > 0 ? int(topK) / groupTopK : 0;
    if (groups <= 1 || groupTopK <= 0 || groupTopK >= groups || picks * groupTopK != int(topK) ||
        perGroup * groups != experts || bin >= experts)
        return binTouchedProbability(experts, topK, bin);
    if (std::fmod(bin, perGroup) == 0.0)  // whole groups
        return 1.0 - choose(groups - bin / perGroup, groupTopK) / choose(groups, groupTopK);
    if (std::fmod(perGroup, bin) == 0.0)  // inside one group
        return double(groupTopK) / groups * (1.0 - choose(perGroup - bin, picks) / choose(perGroup, picks));
    return binTouchedProbability(experts, topK, bin);
}

// Expected distinct bins a token touches when `experts` are spread evenly over `bins` bins.
inline double expectedBinsTouched(double experts, double topK, double bins)
{
    return bins * binTouchedProbability(experts, topK, experts / bins);
}

// Sends per token of one flex dispatch (or combine) from one GPU of the etp x ep group: `nodes`
// NVLink domains of `domainMembers` group members each, `ep` ranks (of etp GPUs each, which all
// receive what their rank does: Megatron's flex dispatcher routes to every etp GPU of an expert).
struct FlexSends {
    double network = 0;  // over the GPU's NIC: one per remote node touched, (N - 1) p
    double nvlink = 0;   // over NVLink: to the touched GPUs of its own node, and forwarded for the
                         // tokens of its rail peers in the N - 1 other nodes: N (D - 1) q
};

// (groups, groupTopK: group-limited routing, 0 for none.)
inline FlexSends flexSends(double experts, double topK, double ep, double nodes, double domainMembers, int groups = 0,
                           int groupTopK = 0)
{
    FlexSends f;
    const double p = binTouchedProbability(experts, topK, experts / nodes, groups, groupTopK);  // a node's experts
    const double q = binTouchedProbability(experts, topK, experts / ep, groups, groupTopK);     // an ep rank's (its etp GPUs)
    f.network = (nodes - 1) * p;
    // (Each of a node's D GPUs holds an ep rank's experts, etp GPUs per rank: a GPU receives the
    // token with probability q; the sender's own copy stays in its memory.)
    f.nvlink = nodes * (domainMembers - 1) * q;
    return f;
}

} // namespace shardscope
