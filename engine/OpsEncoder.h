// The BERT-style encoder's own operations, by the rules of Ops.h (column-major (C, N)
// activations, weight gradients ACCUMULATED, input gradients OVERWRITTEN, no allocation,
// float and double):
//   token types  BertEmbeddings' token_type_embeddings: a (C, types) table, column types[n]
//                added to token n's embedding
//   tanh         BertPooler's activation on the dense output of each sequence's first token
// (The masked-LM head and the next-sentence head are products, a GeLU, a norm and the
// cross-entropy of Ops.h, whose negative targets are ignored.)
#pragma once

#include "Ops.h"

namespace shardscope::engine {

// out (C, N) += wtt (C, types) column types[n], per column n (types[n] in [0, types)).
template <class T>
void token_type_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> wtt, const int* types);
// dwtt (C, types) += dout column n into column types[n] (sequential, in token order).
template <class T>
void token_type_backward(MatRef<T> dwtt, CMatRef<T> dout, const int* types);

// out = tanh(inp), elementwise (out may alias inp).
template <class T>
void tanh_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp);
// dinp = (1 - out^2) * dout from the forward's output (dinp may alias dout).
template <class T>
void tanh_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> out, CVecRef<T> dout);

} // namespace shardscope::engine
