// EmulatedCluster: devices, mesh groups, worker threads; see Cluster.h.
#include "Cluster.h"

#include "MpiSession.h"
#include "ThreadCommunicator.h"

#include <exception>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace shardscope::engine {

namespace {
Layout flatLayout(int devices)
{
    Layout l;
    l.dp = devices;
    return l;
}
} // namespace

EmulatedCluster::EmulatedCluster(const Layout& layout, const DeviceProfile& profile, const LinkSpec& links,
                                 const std::atomic<bool>* cancel, ClusterBackend backend)
    : layout_(layout)
{
    build(profile, links, cancel, backend);
}

EmulatedCluster::EmulatedCluster(int devices, const DeviceProfile& profile, const LinkSpec& links,
                                 const std::atomic<bool>* cancel, ClusterBackend backend)
    : layout_(flatLayout(devices))
{
    build(profile, links, cancel, backend);
}

EmulatedCluster::~EmulatedCluster() = default;

int EmulatedCluster::meshId(int tp, int cp, int dp, int pp) const
{
    return ((pp * layout_.dp + dp) * layout_.cp + cp) * layout_.tp + tp;
}

void EmulatedCluster::build(const DeviceProfile& profile, const LinkSpec& links, const std::atomic<bool>* cancel,
                            ClusterBackend backend)
{
    const Layout& l = layout_;
    if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.cp < 1)
        throw std::invalid_argument("EmulatedCluster: every parallel degree must be at least 1");
    const int n = int(l.devices());
    const int g = l.zero_stage > 0 ? l.zeroGroupSize() : 1;
    if (g < 1 || l.dp % g != 0)
        throw std::invalid_argument("EmulatedCluster: the ZeRO shard group must divide dp");
    std::vector<EmulatedDevice*> raw;
    for (int i = 0; i < n; ++i) {
        devices_.push_back(std::make_unique<EmulatedDevice>(i, profile, 1));
        raw.push_back(devices_.back().get());
    }
    if (backend == ClusterBackend::Mpi)
        comm_ = makeMpiCommunicator(raw, links, cancel);
    else
        comm_ = std::make_unique<ThreadCommunicator>(raw, links, cancel);
    positions_.resize(size_t(n));
    groups_.resize(size_t(n));
    for (int pp = 0; pp < l.pp; ++pp)
        for (int dp = 0; dp < l.dp; ++dp)
            for (int cp = 0; cp < l.cp; ++cp)
                for (int tp = 0; tp < l.tp; ++tp) {
                    const int id = meshId(tp, cp, dp, pp);
                    positions_[size_t(id)] = MeshPosition{tp, cp, dp, pp, links.nodeOf(id)};
                }
    // Group names; with cp = 1 exactly those of a mesh without context parallelism.
    auto tag = [&](const char* kind, int a, int b, int cp = -1) {
        std::string t = std::string(kind) + "(" + std::to_string(a) + "," + std::to_string(b);
        if (cp >= 0 && l.cp > 1)
            t += ",cp" + std::to_string(cp);
        return t + ")";
    };
    // The gradient groups span dp x cp; the ZeRO shard group is g x cp of their ranks.
    const int dpcp = l.dp * l.cp, gc = l.zero_stage > 0 ? g * l.cp : 1;
    for (int pp = 0; pp < l.pp; ++pp) {
        for (int dp = 0; dp < l.dp; ++dp)
            for (int cp = 0; cp < l.cp; ++cp) {
                std::vector<int> ids;
                for (int tp = 0; tp < l.tp; ++tp)
                    ids.push_back(meshId(tp, cp, dp, pp));
                CommGroup& grp = comm_->makeGroup(ids, tag("tp", dp, pp, cp));
                for (int id : ids)
                    groups_[size_t(id)].tp = &grp;
            }
        if (l.cp > 1)
            for (int dp = 0; dp < l.dp; ++dp)
                for (int tp = 0; tp < l.tp; ++tp) {
                    std::vector<int> ring;
                    for (int cp = 0; cp < l.cp; ++cp)
                        ring.push_back(meshId(tp, cp, dp, pp));
                    CommGroup& cg = comm_->makeGroup(ring, "cp(" + std::to_string(tp) + "," + std::to_string(dp) +
                                                               "," + std::to_string(pp) + ")");
                    for (int id : ring)
                        groups_[size_t(id)].cp = &cg;
                }
        for (int tp = 0; tp < l.tp; ++tp) {
            std::vector<int> all;  // rank dp * cp + cp_rank
            for (int dp = 0; dp < l.dp; ++dp)
                for (int cp = 0; cp < l.cp; ++cp)
                    all.push_back(meshId(tp, cp, dp, pp));
            CommGroup& dpg = comm_->makeGroup(all, tag("dp", tp, pp));
            for (int id : all)
                groups_[size_t(id)].dp = &dpg;
            for (int k = 0; k < dpcp / gc; ++k) {
                std::vector<int> ids(all.begin() + k * gc, all.begin() + (k + 1) * gc);
                CommGroup& sg = comm_->makeGroup(ids, tag("shard", tp, pp) + "#" + std::to_string(k));
                for (int id : ids)
                    groups_[size_t(id)].shard = &sg;
            }
            for (int r = 0; r < gc; ++r) {
                std::vector<int> ids;
                for (int k = 0; k < dpcp / gc; ++k)
                    ids.push_back(all[size_t(k * gc + r)]);
                CommGroup& rg = comm_->makeGroup(ids, tag("replica", tp, pp) + "#" + std::to_string(r));
                for (int id : ids)
                    groups_[size_t(id)].replica = &rg;
            }
        }
    }
    // Megatron-LM's expert grid per stage (megatron/core/parallel_state.py @ d98e8a64, order
    // "tp-ep-dp" for the expert RankGenerator): the stage's rank r = tp_idx + tp (cp_idx + cp dp_idx)
    // is also etp_idx + etp (ep_idx + ep edp_idx). ep: same (etp_idx, edp_idx); edp: same (etp_idx, ep_idx).
    const int stage = l.tp * l.cp * l.dp, ep = std::max(1, l.ep), etp = l.expertTensorParallel();
    if (etp >= 1 && stage % (ep * etp) == 0) {
        const int edp = stage / (ep * etp);
        // ZeRO with a shard group smaller than dp (HSDP): dp / zero_group distributed-optimizer
        // instances (Megatron-LM's --num-distributed-optimizer-instances). Megatron splits each edp
        // group into consecutive slices of edp / instances ranks, the experts' shard groups
        // (create_hierarchical_groups level 0, _INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP), and asserts
        // "Expert data parallel size should be divisible by partial DistOpt shard factor"
        // (parallel_state.py @ d98e8a64). Across the instances, dense and expert gradients share one
        // group (get_inter_distributed_optimizer_instance_group): the stage ranks r + k W / instances
        // (W = tp x cp x dp), which is the replica group above.
        const int replicas = l.zero_stage > 0 ? l.dp / g : 1;
        if (edp % replicas != 0)
            throw std::invalid_argument("EmulatedCluster: the " + std::to_string(replicas) +
                                        " ZeRO replicas (dp / zero_group) must divide the expert-data-parallel group of " +
                                        std::to_string(edp));
        for (int pp = 0; pp < l.pp; ++pp)
            for (int t = 0; t < etp; ++t) {
                for (int k = 0; k < edp && ep > 1; ++k) {  // (ep = 1: no group, every expert is local)
                    std::vector<int> ids;
                    for (int j = 0; j < ep; ++j)
                        ids.push_back(pp * stage + t + etp * (j + ep * k));
                    CommGroup& eg = comm_->makeGroup(ids, "ep(" + std::to_string(t) + "," + std::to_string(k) + "," +
                                                              std::to_string(pp) + ")");
                    for (int id : ids)
                        groups_[size_t(id)].ep = &eg;
                }
                for (int j = 0; j < ep && t == 0 && etp > 1; ++j)
                    for (int k = 0; k < edp; ++k) {
                        std::vector<int> ids;
                        for (int u = 0; u < etp; ++u)
                            ids.push_back(pp * stage + u + etp * (j + ep * k));
                        CommGroup& tg = comm_->makeGroup(ids, "etp(" + std::to_string(j) + "," + std::to_string(k) +
                                                                  "," + std::to_string(pp) + ")");
                        for (int id : ids)
                            groups_[size_t(id)].etp = &tg;
                    }
                for (int k = 0; k < edp && t == 0 && etp > 1 && ep > 1; ++k) {
                    std::vector<int> ids;
                    for (int j = 0; j < ep; ++j)
                        for (int u = 0; u < etp; ++u)
                            ids.push_back(pp * stage + u + etp * (j + ep * k));
                    CommGroup& g = comm_->makeGroup(ids, "tpep(" + std::to_string(k) + "," + std::to_string(pp) + ")");
                    for (int id : ids)
                        groups_[size_t(id)].tpep = &g;
                }
                for (int j = 0; j < ep; ++j) {
                    std::vector<int> ids;
                    for (int k = 0; k < edp; ++k)
                        ids.push_back(pp * stage + t + etp * (j + ep * k));
                    CommGroup& dg = comm_->makeGroup(ids, "edp(" + std::to_string(t) + "," + std::to_string(j) + "," +
                                                              std::to_string(pp) + ")");
                    for (int id : ids)
                        groups_[size_t(id)].edp = groups_[size_t(id)].edp_shard = &dg;
                    // HSDP: the experts' ZeRO shard groups, consecutive slices of edp / replicas ranks.
                    for (int k = 0; replicas > 1 && k < replicas; ++k) {
                        const std::vector<int> slice(ids.begin() + k * (edp / replicas),
                                                     ids.begin() + (k + 1) * (edp / replicas));
                        CommGroup& sg = comm_->makeGroup(slice, "edp_shard(" + std::to_string(t) + "," +
                                                                    std::to_string(j) + "," + std::to_string(pp) +
                                                                    ")#" + std::to_string(k));
                        for (int id : slice)
                            groups_[size_t(id)].edp_shard = &sg;
                    }
                }
            }
    }
    if (l.pp > 1)
        for (int dp = 0; dp < l.dp; ++dp)
            for (int cp = 0; cp < l.cp; ++cp)
                for (int tp = 0; tp < l.tp; ++tp) {
                    const int first = meshId(tp, cp, dp, 0), last = meshId(tp, cp, dp, l.pp - 1);
                    CommGroup& eg = comm_->makeGroup({first, last}, tag("embedding", tp, dp, cp));
                    groups_[size_t(first)].embedding = &eg;
                    groups_[size_t(last)].embedding = &eg;
                }
    std::vector<int> everyone;
    for (int i = 0; i < n; ++i)
        everyone.push_back(i);
    CommGroup& world = comm_->makeGroup(everyone, "world");
    for (DeviceGroups& dg : groups_)
        dg.world = &world;
}

int EmulatedCluster::stageNeighbour(int id, int delta) const
{
    const MeshPosition& p = position(id);
    const int stage = p.pp + delta;
    if (stage < 0 || stage >= layout_.pp)
        return -1;
    return meshId(p.tp, p.cp, p.dp, stage);
}

std::optional<WorkerFailure> EmulatedCluster::run(const std::function<void(int)>& work)
{
    std::mutex failureMutex;
    std::optional<WorkerFailure> failure;
    cancelled_ = false;
    std::vector<std::thread> workers;
    workers.reserve(devices_.size());
    auto body = [&](int id) {
        std::string message;
        RunFaultKind kind = RunFaultKind::Other;
        try {
            work(id);
            return;
        } catch (const ClusterAborted&) {
            return;  // stopped because another device failed or the run was cancelled
        } catch (const std::exception& e) {
            message = e.what();
            kind = faultKindOf(e);
        } catch (...) {
            message = "unknown error";
        }
        {
            std::lock_guard<std::mutex> lock(failureMutex);
            if (!failure)
                failure = WorkerFailure{id, message, kind};
        }
        comm_->workerFailed(id, message, kind);  // MPI: every rank stops here
        comm_->abort();
    };
    try {
        for (int id = 0; id < size(); ++id)
            if (comm_->runsDevice(id))
                workers.emplace_back(body, id);
    } catch (const std::system_error& e) {
        // Could not start every worker: stop the started ones (they wait for the missing ones).
        std::lock_guard<std::mutex> lock(failureMutex);
        failure = WorkerFailure{int(workers.size()), std::string("cannot start the worker thread: ") + e.what()};
        comm_->abort();
    }
    for (std::thread& t : workers)
        t.join();
    if (!failure && comm_->aborted() && comm_->cancelRequested())
        cancelled_ = true;
    return failure;
}

} // namespace shardscope::engine
