// Naive reference kernels for OpsBlocks.h: the same maths one scalar at a time, with plain
// loops and no Eigen products, no threads and no cleverness, so that they are easy to check
// by eye. Tests hold the fast kernels of OpsBlocks.cpp equal to these. Same signatures minus
// the pool, same conventions, shapes and accumulate/overwrite rules as OpsBlocks.h.
#pragma once

#include "OpsBlocks.h"

namespace shardscope::engine::reference {

template <class T>
void rmsnorm_forward(MatRef<T> out, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight, double eps);
template <class T>
void rmsnorm_backward(MatRef<T> dinp, VecRef<T> dweight, CMatRef<T> dout, CMatRef<T> inp, CVecRef<T> weight,
                      CVecRef<T> rstd);
template <class T>
void relu_forward(VecRef<T> out, CVecRef<T> inp);
template <class T>
void relu_backward(VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout);
template <class T>
void gated_forward(MatRef<T> out, CMatRef<T> inp, GateKind kind);
template <class T>
void gated_backward(MatRef<T> dinp, CMatRef<T> inp, CMatRef<T> dout, GateKind kind);
template <class T>
void rope_forward(RowsRef<T> x, const int* positions, int heads, int hd, double base);
template <class T>
void rope_backward(RowsRef<T> dx, const int* positions, int heads, int hd, double base);
template <class T>
void attention_probs_forward(MatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, const AttentionShape& s);
template <class T>
void attention_values_forward(MatRef<T> out, CMatRef<T> att, CRowsRef<T> v, const AttentionShape& s);
template <class T>
void attention_backward(RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt, CMatRef<T> dout,
                        CMatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v, const AttentionShape& s);
// Ring attention (context parallelism); dq, dk, dv accumulate as in OpsBlocks.h.
template <class T>
void attention_block_probs_forward(RowsRef<T> att, VecRef<T> lse, CRowsRef<T> q, CRowsRef<T> k,
                                   const AttentionShape& s, const int* qpos, const int* kpos);
template <class T>
void attention_block_values_forward(MatRef<T> out, CRowsRef<T> att, CRowsRef<T> v, const AttentionShape& s);
template <class T>
void attention_block_merge(MatRef<T> out, VecRef<T> lse, CMatRef<T> part, CVecRef<T> part_lse, const AttentionShape& s);
template <class T>
void attention_block_renormalize(RowsRef<T> att, CVecRef<T> block_lse, CVecRef<T> lse, const AttentionShape& s);
template <class T>
void attention_delta(VecRef<T> delta, CMatRef<T> dout, CMatRef<T> out, const AttentionShape& s);
template <class T>
void attention_block_backward(RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt, CMatRef<T> dout,
                              CRowsRef<T> att, CVecRef<T> delta, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v,
                              const AttentionShape& s);

} // namespace shardscope::engine::reference
