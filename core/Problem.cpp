#include "Problem.h"

namespace shardscope {

FieldErrors validate(const Problem& p)
{
    FieldErrors errors = validate(p.model, "model");
    for (auto&& list : {validate(p.cluster, "cluster"), validate(p.training, "training")})
        errors.insert(errors.end(), list.begin(), list.end());
    // Learned position tables cannot be extended; rotary and relative positions can.
    if (p.model.positions == PositionKind::Learned && p.training.seq_len > p.model.max_seq)
        errors.push_back({"training.seq_len", std::to_string(p.training.seq_len) + " exceeds " + p.model.name +
                                                  "'s learned position table of " + std::to_string(p.model.max_seq)});
    // The model's counts fit at its max_seq (validate(model)); a longer rotary sequence may not.
    else if (errors.empty() && !countsFit(p.model, p.training.seq_len))
        errors.push_back({"training.seq_len", "the FLOP count per token of " + p.model.name + " at " +
                                                  std::to_string(p.training.seq_len) +
                                                  " tokens overflows a 64-bit integer (more than 9.2e18)"});
    // An FP8/FP4 recipe runs only where the chip's frameworks run it (ChipSpec::low_precision_recipes,
    // with its source in the catalog): A100 has no FP8 tensor cores; MXFP8 and NVFP4 need Blackwell.
    const ChipSpec& chip = p.cluster.node.chip;
    const char* precision = toString(p.training.precision);
    if (quantizedRecipe(p.training.precision) && !chip.runsRecipe(precision)) {
        std::string runs;
        for (const std::string& r : chip.low_precision_recipes)
            runs += (runs.empty() ? "" : ", ") + r;
        errors.push_back({"training.precision",
                          std::string(precision) + " is not a training recipe of " + chip.name +
                              (runs.empty() ? " (it trains no FP8 or FP4 recipe: use bf16)"
                                            : " (its FP8/FP4 recipes: " + runs + ")")});
    } else if (chip.peakFlops(computeType(p.training.precision)) <= 0)
        errors.push_back({"training.precision", std::string(toString(p.training.precision)) +
                                                    " peak is not published for " + p.cluster.node.chip.name});
    return errors;
}

} // namespace shardscope
