// Naive reference kernels: the same maths as Ops.h, one scalar at a time, with
// plain loops and no Eigen products, no threads and no cleverness, so that
// they are easy to check by eye. Tests hold the fast kernels equal to these.
// Same conventions, shapes and accumulate/overwrite rules as Ops.h.
#pragma once

#include "Ops.h"

namespace shardscope::engine::reference {

template <class T>
void matmul_forward(MatRef<T> out, CMatRef<T> inp, CMatRef<T> weight, CVecRef<T> bias, CMatRef<T> residual);
template <class T>
void matmul_backward(MatRef<T> dinp, MatRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout, CMatRef<T> inp,
                     CMatRef<T> weight);
template <class T>
void layernorm_forward(MatRef<T> out, VecRef<T> mean, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight,
                       CVecRef<T> bias, double eps = kLayerNormEps);
template <class T>
void layernorm_backward(MatRef<T> dinp, VecRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout, CMatRef<T> inp,
                        CVecRef<T> weight, CVecRef<T> mean, CVecRef<T> rstd);
template <class T>
void attention_forward(MatRef<T> out, MatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH);
template <class T>
void attention_backward(MatRef<T> dqkv, CMatRef<T> dout, CMatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH);
template <class T>
void gelu_forward(VecRef<T> out, CVecRef<T> inp);
template <class T>
void gelu_backward(VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout);
template <class T>
void softmax_crossentropy_forward(MatRef<T> probs, VecRef<T> losses, CMatRef<T> logits, const TokenRef& targets);
template <class T>
void crossentropy_softmax_backward(MatRef<T> dlogits, CMatRef<T> probs, const TokenRef& targets, T dloss);
template <class T>
void adamw_update(T* params, const T* grads, T* m, T* v, std::int64_t count, const AdamWSettings& s, bool decay,
                  int step, double grad_scale);

} // namespace shardscope::engine::reference
