#!/bin/sh
# Runs ShardScope's Megatron-LM, Megatron-Bridge, DeepSpeed, torchtitan and MaxText exports through their own
# argument parser / validate_args, config classes and config schema (packaging/validate-exports.py
# says what runs and what is stood in for). Not part of the CTest suite: it needs checkouts.
#
#   packaging/validate-exports.sh [--megatron DIR] [--deepspeed DIR] [--maxtext DIR] [--torchtitan DIR]
#                                  [--megatron-bridge DIR (with --megatron)]
#
# DIR: a Megatron-LM checkout (its megatron/ package), a DeepSpeed checkout (deepspeed/,
# accelerator/, op_builder/), a MaxText checkout (src/maxtext/), a torchtitan checkout
# (torchtitan/), a Megatron-Bridge checkout (src/). Cases without a checkout are
# skipped. BUILD_DIR (environment, default ./build) holds shardscope-cli. Needs python3 with
# pydantic, PyYAML and typing_extensions; no torch, jax or network.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/validate-exports.py" --cli "${BUILD_DIR:-build}/app/shardscope-cli" "$@"
