// Collective costs on the groups' real placement (alpha-beta model, ring
// algorithms; formulas.md, "Collectives"). A group of n devices placed with a
// stride in the device mesh either sits inside one scale-up domain (NeuronLink,
// NVLink/NVSwitch, ICI), or spans domains: then it runs hierarchically — reduce-
// scatter inside the domain, the cross-domain part over the node's network shared
// by all its devices, all-gather inside (two-level, when `hierarchical`), or as one
// flat ring whose cross-domain hops run at each device's share of the node
// network (DeepSpeed of 2021), or — `multi_nic_rings` — as NCCL builds its rings: one channel per
// NIC, each ring crossing the domain boundary through a different NIC, so a domain's k members
// cross with k NICs side by side and a flat ring's crossing hop runs at k per-device shares of the
// node network (one NIC per GPU on p4d/p5/DGX: the whole node's network when the group fills the
// node). Bandwidths are bus bandwidths as nccl-tests defines them (doc/PERFORMANCE.md @ a0b82b22:
// busbw = algbw x 2 (n - 1)/n for all-reduce, x (n - 1)/n for all-gather and reduce-scatter; "each
// rank has a bandwidth to the outside world of B"): the time of a ring step sequence is (n - 1)/n S
// over the slowest per-rank link. Plain inline arithmetic: the cost model calls these millions of
// times a second.
#pragma once

#include <algorithm>

namespace shardscope {

// Per-device links, one direction, after efficiency.
struct LinkModel {
    double intra_bytes_per_second = 0;  // scale-up link per device
    double inter_bytes_per_second = 0;  // node network share per device
    double intra_latency_s = 0;
    double inter_latency_s = 0;
    double domain_devices = 1;          // devices in one scale-up domain
    bool hierarchical = false;          // two-level collectives across domains
    double launch_s = 0;                // once per collective call: launch and handshake
    // Flat rings cross domains over all their members' NICs at once (NCCL's channels, one per NIC).
    bool multi_nic_rings = false;
};

// nccl-tests' bus bandwidth of a collective from its algorithm bandwidth S / t (doc/PERFORMANCE.md).
inline double allReduceBusBandwidth(double n, double algorithmBandwidth)
{
    return n > 1 ? algorithmBandwidth * 2 * (n - 1) / n : 0;
}
inline double ringHalfBusBandwidth(double n, double algorithmBandwidth)  // all-gather, reduce-scatter
{
    return n > 1 ? algorithmBandwidth * (n - 1) / n : 0;
}

// Where a group of n devices with mesh stride `stride` sits.
struct GroupPlacement {
    double size = 1;               // n
    double members_per_domain = 1; // k: members that share a scale-up domain
    double domains = 1;            // g = n / k
    bool crossesDomains() const { return domains > 1; }
};

inline GroupPlacement placeGroup(double n, double stride, double domainDevices)
{
    GroupPlacement g;
    g.size = n;
    if (n <= 1) {
        return g;
    }
    if (stride * n <= domainDevices) {
        g.members_per_domain = n;
        g.domains = 1;
    } else if (stride >= domainDevices) {
        g.members_per_domain = 1;
        g.domains = n;
    } else {
        g.members_per_domain = domainDevices / stride;
        g.domains = n / g.members_per_domain;
    }
    return g;
}

// Ring reduce-scatter or all-gather of `bytes` (the full buffer) among n members over one link.
inline double ringHalfTime(double n, double bytes, double bandwidth, double latency)
{
    if (n <= 1)
        return 0;
    return (n - 1) * latency + (n - 1) / n * bytes / bandwidth;
}

// The ring steps of a reduce-scatter (or all-gather) over a placed group: inside the domain
// first, then across.
inline double reduceScatterStepsTime(const GroupPlacement& g, double bytes, const LinkModel& link)
{
    if (g.size <= 1)
        return 0;
    if (!g.crossesDomains())
        return ringHalfTime(g.size, bytes, link.intra_bytes_per_second, link.intra_latency_s);
    const double k = g.members_per_domain;
    if (!link.hierarchical) {
        // One ring over all members: every step waits for the slowest (cross-domain) hop. With one
        // ring per NIC, the k members of a domain send their crossing hops through k NICs at once:
        // the ring's data split over them crosses at k per-device shares (still no faster than the
        // scale-up link every member's share of every ring runs through).
        const double crossing = link.multi_nic_rings ? g.members_per_domain * link.inter_bytes_per_second
                                                     : link.inter_bytes_per_second;
        return ringHalfTime(g.size, bytes, std::min(link.intra_bytes_per_second, crossing), link.inter_latency_s);
    }
    return ringHalfTime(k, bytes, link.intra_bytes_per_second, link.intra_latency_s) +
           ringHalfTime(g.domains, bytes / k, link.inter_bytes_per_second, link.inter_latency_s);
}

// One collective call: its launch and its steps.
inline double reduceScatterTime(const GroupPlacement& g, double bytes, const LinkModel& link)
{
    return g.size <= 1 ? 0 : link.launch_s + reduceScatterStepsTime(g, bytes, link);
}

inline double allGatherTime(const GroupPlacement& g, double bytes, const LinkModel& link)
{
    return reduceScatterTime(g, bytes, link);  // the same steps in reverse
}

// All-reduce = reduce-scatter + all-gather in one call; across domains this is the
// hierarchical (two-level) all-reduce: RS inside, all-reduce of S/k across, AG inside.
inline double allReduceTime(const GroupPlacement& g, double bytes, const LinkModel& link)
{
    return g.size <= 1 ? 0 : link.launch_s + 2 * reduceScatterStepsTime(g, bytes, link);
}

// Bytes one member sends in a ring reduce-scatter or all-gather of `bytes`, and in an
// all-reduce (formulas.md: (n - 1)/n S and 2 (n - 1)/n S). The same for flat and
// two-level algorithms in this accounting: the data each member contributes.
inline double ringHalfBytes(double n, double bytes) { return n > 1 ? (n - 1) / n * bytes : 0; }
inline double allReduceBytes(double n, double bytes) { return 2 * ringHalfBytes(n, bytes); }

// All-to-all (MPI_Alltoall; NCCL's grouped send/recv, what Megatron-LM's expert-parallel token
// dispatch and combine run): each of the n members hands over `bytes` (its send buffer, its own
// share included) split evenly, bytes / n to every member. Every message is in flight at once: the
// k - 1 peers in the member's scale-up domain over the intra link, the n - k others over its share
// of the node network, the two links side by side, so the call lasts as long as the busier link.
// (Not a ring: one latency per link, not per step. The engine's Communicator clocks it alike.)
inline double allToAllTime(const GroupPlacement& g, double bytes, const LinkModel& link)
{
    if (g.size <= 1)
        return 0;
    const double share = bytes / g.size;
    const double intraPeers = g.members_per_domain - 1, interPeers = g.size - g.members_per_domain;
    const double intra = intraPeers > 0 ? link.intra_latency_s + intraPeers * share / link.intra_bytes_per_second : 0.0;
    const double inter = interPeers > 0 ? link.inter_latency_s + interPeers * share / link.inter_bytes_per_second : 0.0;
    return link.launch_s + std::max(intra, inter);
}

// Point-to-point between neighbouring pipeline stages.
inline double sendRecvTime(bool crossesDomains, double bytes, const LinkModel& link)
{
    return link.launch_s + (crossesDomains ? link.inter_latency_s + bytes / link.inter_bytes_per_second
                                           : link.intra_latency_s + bytes / link.intra_bytes_per_second);
}

} // namespace shardscope
