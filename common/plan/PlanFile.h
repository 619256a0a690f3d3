//===- PlanFile.h - The binary plan format ----------------------*- C++ -*-===//
//
// A plan is everything the runtime needs to train a model: the persistent state (parameters,
// gradients, optimizer moments) with each rank's part of their shapes and their initialisers,
// the mesh the ranks are laid out on with the communicator groups it spans, and per pipeline
// stage a set of programs — straight-line lists of kernel calls on buffers at static offsets
// in one arena — that every rank of the stage runs. Nothing in a plan is listed per rank: what
// differs between the ranks of a stage follows from their mesh coordinates, so a plan's size
// does not grow with dp or tp. The compiler writes it (from the plan dialect); the runtime
// reads it without MLIR.
//
// On disk (all integers little-endian), see docs/plan-format.md:
//   "TESSPLAN" | u32 version | u32 flags (0) | u64 payload bytes | u64 XXH3 of the payload
//   payload: the Plan below, field by field; strings and vectors are u64-length-prefixed.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_PLAN_PLANFILE_H
#define TESSEL_COMMON_PLAN_PLANFILE_H

#include "common/support/DType.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tessel::planfile {

constexpr uint32_t kPlanVersion = 11;
/// The oldest version read: version 7 has version 8's payload, checksummed with FNV-1a;
/// version 8 lacks version 9's loaded initialisers (`init_source`, `init_slice`); version 9
/// lacks version 10's buffer lifetimes (Program::buffers); version 10 lacks version 11's
/// decode plan (Plan::decoder).
constexpr uint32_t kOldestPlanVersion = 7;
constexpr char kPlanMagic[8] = {'T', 'E', 'S', 'S', 'P', 'L', 'A', 'N'};

/// Where a kernel operand lives: a byte range of the rank's arena, or of a state tensor.
enum class Storage : uint8_t { Arena = 0, State = 1 };
struct BufferRef {
  Storage storage = Storage::Arena;
  uint32_t state = 0;  ///< Index into Plan::state when storage == State.
  uint64_t offset = 0; ///< Byte offset into the arena (or the state tensor).
  uint64_t bytes = 0;
  DType dtype = DType::F32;
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
struct Attr {
  std::string name;
  AttrValue value;
};

/// One kernel call: reads `inputs`, writes `outputs`.
struct Instr {
  std::string kernel;
  std::vector<BufferRef> inputs, outputs;
  std::vector<Attr> attrs;
  std::string loc;     ///< The spec location it came from, "file:line:col".
  uint32_t stream = 0; ///< Issue order within a stream is program order.
  /// Recomputes in the backward pass what the forward pass computed (recompute = selective or
  /// full): profiles count its time apart.
  bool recomputed = false;

  const Attr *find(const std::string &name) const;
};

/// A named program argument or result: tokens, targets, loss, logits, grad_norm, lr.
struct Port {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< This rank's part; see `split`.
  /// Per dim, the group that splits it ("" for none), or empty when nothing is split: the rank
  /// holds block i of a dim split over a group of size k (i its index in the group), so the
  /// whole dim is shape[d] * k.
  std::vector<std::string> split;
  BufferRef buffer;
};

/// What an arena buffer holds, as memory profiles draw it: a program input (the host writes
/// it before the run); a forward value kept for the backward pass; a value recomputed for the
/// backward pass; anything else (the forward pass's and the backward pass's temporaries,
/// gradients on their way to the state, collective buffers, outputs).
enum class BufferKind : uint8_t { Temporary = 0, Input = 1, Kept = 2, Recomputed = 3 };
constexpr uint8_t kBufferKinds = 4;
/// "temporary", "input", "kept", "recomputed".
const char *bufferKindName(BufferKind kind);

/// One buffer of a program's memory plan: arena bytes [offset, offset + bytes) hold one value
/// from instruction `first` to instruction `last` of the program (indices into its `instrs`,
/// inclusive). `bytes` is the value's size, before the planner's 64-byte alignment. No two
/// buffers overlap in bytes while both hold values; every arena operand of an instruction lies
/// in a buffer that holds its value then.
struct ArenaBuffer {
  uint64_t offset = 0, bytes = 0;
  uint32_t first = 0, last = 0;
  BufferKind kind = BufferKind::Temporary;
};

/// A program of one pipeline stage, which every rank of the stage runs.
struct Program {
  std::string name;
  uint32_t stage = 0;      ///< The pipeline stage whose ranks run it (0 without a pipeline).
  uint64_t arenaBytes = 0; ///< Peak of this program's memory plan.
  std::vector<Port> inputs, outputs;
  std::vector<Instr> instrs;
  /// Its memory plan, buffer by buffer, in the order the compiler allocated them (empty in a
  /// plan of version 9 or older).
  std::vector<ArenaBuffer> buffers;
};

/// Persistent tensors. Role is "param", "grad", "adam_m", "adam_v", "momentum", "working",
/// "kv_cache" (a decode program's key or value cache) or "decode_state" (the per-sequence
/// totals of a decode program's running sum); `of` names the parameter a gradient, moment or
/// working copy belongs to.
struct StateTensor {
  std::string name, role, of;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< This rank's part; see `split`.
  std::vector<std::string> dims;
  /// Per dim, the group that splits it ("" for none), or empty when nothing is split; as
  /// Port::split.
  std::vector<std::string> split;
  std::string init = "zeros"; ///< normal | uniform | zeros | ones | constant | load
  double initA = 0, initB = 0;
  /// `load`: the stored tensor's name in the weights the run starts from, and empty or
  /// {part, parts, axis, rows}: the first `rows` entries of the stored tensor's first dim (-1:
  /// all), cut into `parts` equal pieces along `axis` (negative: from the last), of which the
  /// parameter is piece `part`.
  std::string initSource;
  std::vector<int64_t> initSlice;
  /// The pipeline stages whose ranks hold the tensor (a rank's stage is its index in its "pp"
  /// group); empty: every rank holds it. A rank of another stage holds nothing of it.
  std::vector<uint32_t> stages;
  uint64_t bytes() const;
  /// Whether ranks of pipeline stage `stage` hold the tensor.
  bool heldBy(uint32_t stage) const;
  /// Whether a checkpoint holds the tensor: parameters and optimizer state do; gradients (zero
  /// between steps), working copies (the `working_copies` program makes them from the
  /// parameters) and KV caches do not.
  bool checkpointed() const {
    return role != "grad" && role != "working" && role != "kv_cache" && role != "decode_state";
  }
};

/// The program that makes every parameter's working copy (role "working") from the parameter,
/// once per pipeline stage; the runtime runs it after it sets the parameters (initialisation,
/// a checkpoint). A plan without working copies has none.
inline constexpr const char *kWorkingCopiesProgram = "working_copies";

/// One axis of the mesh the ranks are laid out on.
struct MeshAxis {
  std::string name;
  uint32_t size = 1;
};

/// A communicator group: the mesh axes it spans (indices into Plan::mesh, ascending). Its
/// instances are the sets of ranks whose coordinates agree on every other axis; a rank's index
/// in its instance counts row-major over the group's axes, which is ascending rank order. With
/// a mesh {dp = 2, tp = 2}, "tp" (axis 1) has the instances {0, 1} and {2, 3}, "dp" (axis 0)
/// {0, 2} and {1, 3}, and a group of both axes is {0, 1, 2, 3}.
struct Group {
  std::string name;
  std::vector<uint32_t> axes;
};

/// The instance of a group that holds one rank: its ranks in group-index order, and the rank's
/// index among them.
struct GroupInstance {
  std::vector<uint32_t> ranks;
  uint32_t index = 0;
};

struct Plan {
  /// The format version it was read from (kPlanVersion for a plan the compiler made): what an
  /// older version lacks is left empty.
  uint32_t version = kPlanVersion;
  std::string model;
  uint32_t worldSize = 1;
  uint32_t streams = 1;
  std::vector<Attr> config; ///< Training settings and dims, by name.
  std::vector<StateTensor> state;
  /// The axes of the rank mesh, outermost first; their sizes multiply to worldSize (none for
  /// one rank). Ranks are numbered row-major over them: the last axis varies fastest.
  std::vector<MeshAxis> mesh;
  std::vector<Group> groups; ///< At most one per name.
  /// One version per (name, stage): every rank of a pipeline stage runs the same programs, and
  /// what differs between them (which block of a split tensor each holds, where it sits in a
  /// collective) follows from their place in the groups at run time.
  std::vector<Program> programs;
  /// The decode plan, for generation with a KV cache: the same mesh and parameters, the caches
  /// (role "kv_cache") and the programs `prefill` and `decode_b<B>` (tokens, positions and
  /// block_table in, logits out); null when the model or its layout has none, and then
  /// `decoderRefused` says why.
  std::shared_ptr<const Plan> decoder;
  std::string decoderRefused;

  const Attr *findConfig(const std::string &name) const;
  /// The version of program `name` that `rank` runs: its pipeline stage's.
  const Program *findProgram(const std::string &name, uint32_t rank = 0) const;
  /// The ranks that run `program`: every rank of its stage, ascending.
  std::vector<uint32_t> ranksOf(const Program &program) const;
  /// Per pipeline stage, its ranks in ascending order (one stage of every rank without "pp").
  std::vector<std::vector<uint32_t>> ranksByStage() const;
  /// The group named `name`, or null.
  const Group *groupNamed(const std::string &name) const;
  /// The ranks in each instance of `group`: the product of its axes' sizes.
  uint32_t groupSize(const Group &group) const;
  /// The index of `rank` in its instance of `group`.
  uint32_t groupIndex(const Group &group, uint32_t rank) const;
  /// The instance of group `name` that holds `rank`, worked out from the rank's mesh
  /// coordinates; nothing when the plan has no group of that name.
  std::optional<GroupInstance> findGroup(const std::string &name, uint32_t rank) const;
  /// The coordinates of `rank` along each mesh axis.
  std::vector<uint32_t> meshCoordinates(uint32_t rank) const;
  /// The pipeline stages: the size of group "pp", 1 without one.
  uint32_t pipelineStages() const;
  /// The pipeline stage of `rank`: its index in its "pp" group, 0 without one.
  uint32_t pipelineStage(uint32_t rank) const;
};

/// The model chunk a pipeline program runs ("forward.3" runs chunk 3); false for the other
/// programs, whose names have no '.'. A chunk c runs on pipeline stage c % stages.
bool pipelineChunkOf(const std::string &program, uint32_t &chunk);

/// The file bytes of `plan`, in format `version` (kOldestPlanVersion to kPlanVersion; an older
/// one leaves out what it lacks, such as version 9's loaded initialisers: for compatibility
/// tests).
std::vector<uint8_t> serializePlan(const Plan &plan, uint32_t version = kPlanVersion);

/// The largest plan file a tool reads (a plan does not grow with the ranks: GPT-3 175B's is a few
/// MiB), so that a device or a huge file where a plan is expected is refused, not read whole.
constexpr uint64_t kMaxPlanFileBytes = uint64_t(1) << 30;

/// Parses file bytes; on failure returns false with the reason (bad magic, another version,
/// checksum mismatch, truncation, an operand outside its buffer, ...).
bool parsePlan(const uint8_t *data, size_t size, Plan &plan, std::string &error);

/// Checks what parsing cannot: the mesh's axes are named once each, of positive sizes that
/// multiply to worldSize; each group is named once and spans known axes in ascending order;
/// every operand lies inside the arena or its state tensor, and the state tensor is one the
/// program's pipeline stage holds; every group an instruction (`group`, `row_group`,
/// `col_group`, `head_group`) or a `split` names exists; a (program, stage) pair appears
/// once, a program without a chunk is on every stage, and a pipeline program of chunk c is on
/// stage c % stages and no other.
bool validatePlan(const Plan &plan, std::string &error);

} // namespace tessel::planfile

#endif // TESSEL_COMMON_PLAN_PLANFILE_H
