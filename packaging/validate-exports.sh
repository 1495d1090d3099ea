#!/bin/sh
# Runs ShardScope's Megatron-LM and DeepSpeed exports through the frameworks' own argument
# parser / validate_args and config classes (packaging/validate-exports.py says what runs and
# what is stood in for). Not part of the CTest suite: it needs checkouts of the frameworks.
#
#   packaging/validate-exports.sh MEGATRON_LM_DIR DEEPSPEED_DIR [BUILD_DIR]
#
# MEGATRON_LM_DIR: a Megatron-LM checkout (its megatron/ package); DEEPSPEED_DIR: a DeepSpeed
# checkout (deepspeed/, accelerator/, op_builder/). BUILD_DIR defaults to ./build. Needs python3
# with pydantic and typing_extensions (DeepSpeed's config classes are pydantic models); no torch.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
megatron=${1:?usage: validate-exports.sh MEGATRON_LM_DIR DEEPSPEED_DIR [BUILD_DIR]}
deepspeed=${2:?usage: validate-exports.sh MEGATRON_LM_DIR DEEPSPEED_DIR [BUILD_DIR]}
build=${3:-build}
exec python3 "$here/validate-exports.py" --cli "$build/app/shardscope-cli" --megatron "$megatron" --deepspeed "$deepspeed"
