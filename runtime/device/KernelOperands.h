//===- KernelOperands.h - Checks of a kernel call's shapes and strides -*- C++ -*-===//
//
// What every device's handlers check of a call's size and stride parameters before they
// launch: the CPU and CUDA backends share the Shape and Strides of kernels/cpu/CpuKernels.h and
// refuse the same plans with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H
#define TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H

#include "runtime/core/KernelCall.h"

#include "kernels/cpu/CpuKernels.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// The product of `v`'s entries (1 for none).
int64_t product(const std::vector<int64_t> &v);

/// The number of elements a strided view of `shape` reaches: one past its largest offset.
int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides);

/// Reads the `rows` and `cols` of a row-wise kernel, which must be positive.
template <class P> bool rowsCols(KernelCall &c, const P &p, int64_t &rows, int64_t &cols) {
  rows = p.rows;
  cols = p.cols;
  if (rows <= 0 || cols <= 0)
    return c.fail("has non-positive rows or cols");
  return true;
}

/// top_k_mask's rows and cols, checked with its operands' sizes and k in [1, cols].
bool topKMaskArgs(KernelCall &c, const catalogue::TopKMask &p, int64_t &rows, int64_t &cols);

/// `sizes` as a kernel Shape; false (with the call's error) beyond kMaxRank dims or for a size
/// that is not positive.
bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, cpu::Shape &shape);

/// `in` as one operand's Strides over `rank` dims; false for another count or a negative one.
bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, cpu::Strides &out);

/// The learning rate of `step` (counting from 1) under `p`'s schedule, in f64: what
/// learning_rate writes (rounded to f32) on every device.
double scheduledLearningRate(const catalogue::LearningRate &p, int64_t step);

/// A gemm call checked and laid out for the kernels: the product's sizes, leading dims,
/// `accumulate` as beta and the last batch dim as the strided batch (`args`), and the operand
/// offsets (a, b, c) of each index of the other batch dims, row-major, each one product.
struct GemmCalls {
  cpu::GemmArgs args;
  std::vector<std::array<int64_t, 3>> offsets;
};
/// False with the call's error for sizes or strides the operands do not hold, or when the
/// call is only being validated.
bool gemmCalls(KernelCall &c, const catalogue::Gemm &p, GemmCalls &out);

/// A fused_elementwise call checked and decoded: its shape, each input's strides, the body's
/// steps as the kernels take them, which step each output takes, and the operands.
struct FusedCall {
  cpu::Shape shape;
  std::vector<cpu::Strides> strides;
  std::vector<cpu::FusedStep> steps;
  std::vector<int32_t> outSteps;
  /// The operands' addresses, and their element types (a 16-bit operand's address is not an
  /// f32 array: only a kernel generated for its type reads it).
  std::vector<const float *> ins;
  std::vector<float *> outs;
  std::vector<planfile::DType> inTypes, outTypes;
};
/// False with the call's error if the body reads an input the call lacks, `outputs` names a
/// step the body does not have, or the operands are too small; false when only validating.
bool fusedCall(KernelCall &c, const catalogue::FusedElementwise &p, FusedCall &out);

/// A pack call checked: one `outers` and `chunks` entry per input, positive sizes, operands
/// that hold them; returns its inputs. False with the call's error, or when only validating.
bool packInputs(KernelCall &c, const catalogue::Pack &p, std::vector<const float *> &inputs);

/// Where this rank's block of a dim split over group `name` lies: [first, first + size) of
/// `whole`. Without a group (null) the rank holds the whole dim. False with the call's error
/// for a group the plan lacks.
bool blockOfDim(KernelCall &c, const std::string *name, int64_t size, int64_t &first,
                int64_t &whole);

/// The AttentionArgs of an attention or attention_grad call (its head block under
/// `head_group`, its head-tail queries under `seq_group`); false with the call's error for
/// sizes the kernels do not take.
bool attentionArgs(KernelCall &c, const catalogue::Attention &p, cpu::AttentionArgs &a);
bool attentionArgs(KernelCall &c, const catalogue::AttentionGrad &p, cpu::AttentionArgs &a);

/// The RingBlockArgs of an attention_block or attention_block_grad call: its sizes, its head
/// block under `head_group`, and the ring indices of its queries (this rank in `group`) and of
/// its keys (`step` ranks before). False with the call's error.
bool ringBlockArgs(KernelCall &c, const catalogue::AttentionBlock &p, cpu::RingBlockArgs &r);
bool ringBlockArgs(KernelCall &c, const catalogue::AttentionBlockGrad &p, cpu::RingBlockArgs &r);
/// Checks the operands of a ring step (`grad`: attention_block_grad's) against its sizes;
/// false with the call's error.
bool needRingOperands(KernelCall &c, const cpu::RingBlockArgs &r, bool grad);
/// Sets r.attention's head-tail starts of the queries and the keys from the ring indices
/// (RingBlockArgs::queryPosition, keyPosition), as the CUDA ring steps take them.
void placeRingBlocks(cpu::RingBlockArgs &r);

/// The positions of a rope call's rows in the whole sequence: under a head-tail `seq_group`
/// two runs starting at `headStart` and `tailStart` (cpu::rope), else -1 for both. False with
/// the call's error.
bool ropePositions(KernelCall &c, const catalogue::Rope &p, int64_t &headStart, int64_t &tailStart);

/// What shard_slice copies: y (dense, of `shape`) = x + `offset` read through `strides`; this
/// rank's block of [outer, ways, chunk], or under a head-tail group its head and tail halves.
/// False with the call's error.
bool shardSliceView(KernelCall &c, const catalogue::ShardSlice &p, const CommGroup &g,
                    cpu::Shape &shape, cpu::Strides &strides, int64_t &offset);

/// The seed of dropout's mask for op `mask` of the call's step: one mask per (run seed, step,
/// op), so the backward pass reproduces the forward's.
uint64_t dropoutSeed(const KernelCall &c, int64_t mask);

/// Where dropout's block lies in the whole tensor of the whole step batch (see the CPU
/// handler): per dim of p.shape its `offset`, its second chunk's start under a head-tail split
/// (`tail`, -1 where none; cpu::dropoutBlock) and the whole size, and its element count. False
/// with the call's error for inconsistent parameters.
bool dropoutBlock(KernelCall &c, const catalogue::Dropout &p, std::vector<int64_t> &offset,
                  std::vector<int64_t> &tail, std::vector<int64_t> &whole, int64_t &n);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H
