//===- Options.cpp - The command line of the tessel driver ----------------===//
//
// Every subcommand of `tessel` that Commands.h declares and every option of them, in this one
// file. An option adds itself to the subcommands it names as it is constructed, so they must
// be constructed before it, and C++ orders construction only within a file; the options the
// commands share name the subcommands of every command file, so all of them live here.
// `--help` lists each command's options sorted by name, whatever their order here.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

using namespace llvm;

namespace tessel::driver {

cl::OptionCategory category("Tessel options");

cl::SubCommand checkCommand("check", "Check a .model file and report every error in it");
cl::SubCommand compileCommand("compile", "Compile a .model file (--emit chooses the stage)");
cl::SubCommand runCommand("run", "Compile a .model file and train it now");
cl::SubCommand generateCommand("generate",
                               "Compile a .model file and print text sampled from a checkpoint");
cl::SubCommand estimateCommand("estimate",
                               "Print the memory per rank and the communication per step that a "
                               ".model file's layout implies");
cl::SubCommand calibrateCommand("calibrate",
                                "Measure this machine (GEMM, attention, memory bandwidth, "
                                "collectives) and write it as a cluster file");
cl::opt<std::string> calibrateOutput("o", cl::desc("Write the cluster file here (default: stdout)"),
                                     cl::value_desc("file.cluster"), cl::init("-"),
                                     cl::sub(calibrateCommand));
cl::opt<int> calibrateThreads("threads",
                              cl::desc("Compute threads per rank to measure with (default: every "
                                       "core)"),
                              cl::init(0), cl::sub(calibrateCommand));
cl::opt<int> calibrateRanks("ranks",
                            cl::desc("Ranks (threads of one process) measuring at once: each "
                                     "figure is what one of them gets (default 1)"),
                            cl::init(1), cl::sub(calibrateCommand));
cl::opt<bool> calibrateQuick("quick", cl::desc("Shorter measurements (less accurate)"),
                             cl::sub(calibrateCommand));
cl::opt<bool> calibrateMpi("mpi",
                           cl::desc("Also measure the MPI communicator (2 processes under "
                                    "mpirun) as the inter-node link"),
                           cl::sub(calibrateCommand));
cl::opt<std::string> calibrateModel(
    "model",
    cl::desc("Also measure every GEMM shape this model's plan calls (written as "
             "efficiency.gemm.shapes; estimates of this model then time its GEMMs as measured)"),
    cl::value_desc("file.model"), cl::sub(calibrateCommand));
cl::SubCommand tuneCommand("tune",
                           "Search the parallel layouts of N accelerators of a cluster for the "
                           "fastest step that fits in memory");
cl::opt<std::string> tuneCluster("cluster", cl::desc("The cluster (as estimate --cluster)"),
                                 cl::value_desc("name|file.cluster"), cl::Required,
                                 cl::sub(tuneCommand));
cl::opt<int> tuneGpus("gpus", cl::desc("Accelerators to lay the model over"), cl::Required,
                      cl::sub(tuneCommand));
cl::opt<unsigned> tuneTop("top", cl::desc("Layouts to print (default 10)"), cl::init(10),
                          cl::sub(tuneCommand));
cl::opt<bool> tuneJson("json", cl::desc("Print the layouts as JSON"), cl::sub(tuneCommand));
cl::opt<std::string> tuneLayout(
    "layout",
    cl::desc("Predict this layout only, e.g. \"dp=16 tp=8 pp=8 interleaved v=2 sp zero=1 mb=1 "
             "recompute=selective\""),
    cl::sub(tuneCommand));
cl::opt<std::string> tuneWrite("write",
                               cl::desc("Write the best layout as a `parallel` section here"),
                               cl::value_desc("file"), cl::sub(tuneCommand));
cl::opt<std::string> tuneSvg("svg",
                             cl::desc("Draw the candidates (memory against step time) as an SVG"),
                             cl::value_desc("file.svg"), cl::sub(tuneCommand));
cl::SubCommand kernelsCommand("kernels",
                              "List the kernels a plan calls: operands, parameters, what each "
                              "computes (the kernel catalogue)");
cl::opt<bool> kernelsMarkdown("markdown",
                              cl::desc("Print the kernel tables of docs/plan-format.md"),
                              cl::sub(kernelsCommand));
cl::opt<bool> estimateJsonOutput("json", cl::desc("Print the estimate as JSON"),
                                 cl::sub(estimateCommand));
cl::opt<std::string> estimateTrace("trace",
                                   cl::desc("Write the predicted pipeline schedule as a Chrome "
                                            "trace (opens in Perfetto)"),
                                   cl::value_desc("file.json"), cl::sub(estimateCommand));
cl::opt<std::string> estimateCluster(
    "cluster",
    cl::desc("Predict the step time on this cluster: a .cluster file or a shipped preset "
             "(a100-80gb-sxm, h100-sxm, h200; docs/planning.md)"),
    cl::value_desc("name|file.cluster"), cl::sub(estimateCommand));
cl::opt<std::string> estimateSvg("svg", cl::desc("Write the predicted pipeline schedule as an SVG"),
                                 cl::value_desc("file.svg"), cl::sub(estimateCommand));
cl::opt<std::string> estimateMemorySvg(
    "memory-svg",
    cl::desc("Draw the predicted memory of a rank over its training steps, stacked by what it "
             "holds (one picture per pipeline stage, NAME.stage<S>.svg, unless --rank)"),
    cl::value_desc("file.svg"), cl::sub(estimateCommand));
cl::opt<std::string> estimateMemoryTrace(
    "memory-trace",
    cl::desc("Write the predicted memory profiles as a Chrome trace of counters (Perfetto)"),
    cl::value_desc("file.json"), cl::sub(estimateCommand));
cl::opt<int64_t> estimateMemoryRank("rank",
                                    cl::desc("The rank --memory-svg and --memory-trace profile "
                                             "(default: the first rank of each pipeline stage)"),
                                    cl::init(-1), cl::sub(estimateCommand));
cl::opt<int> estimateMemorySteps("memory-steps",
                                 cl::desc("Training steps the memory profile shows (default 2)"),
                                 cl::init(2), cl::sub(estimateCommand));

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<file.model>"), cl::Required,
                               cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                               cl::sub(generateCommand), cl::sub(estimateCommand),
                               cl::sub(tuneCommand), cl::cat(category));
cl::list<std::string> runnerArgs(cl::Positional,
                                 cl::desc("[options of the compiled model, e.g. --steps 100 "
                                          "or --checkpoint DIR --prompt TEXT]"),
                                 cl::ZeroOrMore, cl::sub(runCommand), cl::sub(generateCommand),
                                 cl::cat(category));
cl::list<std::string> importDirs("I", cl::desc("Add a directory to search for imports"),
                                 cl::value_desc("dir"), cl::Prefix, cl::sub(checkCommand),
                                 cl::sub(compileCommand), cl::sub(runCommand),
                                 cl::sub(generateCommand), cl::sub(estimateCommand),
                                 cl::sub(tuneCommand), cl::sub(calibrateCommand),
                                 cl::cat(category));
cl::opt<int64_t> ranks("ranks",
                       cl::desc("Number of ranks the run will have; the mesh must match it"),
                       cl::init(0), cl::sub(checkCommand), cl::sub(compileCommand),
                       cl::sub(runCommand), cl::sub(generateCommand), cl::sub(estimateCommand),
                       cl::cat(category));

cl::opt<Fuse> fuse("fuse",
                   cl::desc("Fuse chains of elementwise ops into one kernel each (default: on)"),
                   cl::init(Fuse::On),
                   cl::values(clEnumValN(Fuse::On, "on", "fuse (-tessel-fuse-elementwise)"),
                              clEnumValN(Fuse::Off, "off", "one kernel per elementwise op")),
                   cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                   cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<Fuse> fuseLoss(
    "fuse-loss",
    cl::desc("Fuse the output head's contraction with cross-entropy, computed a chunk of rows "
             "at a time so the logits never exist whole (default: on; --fuse=off turns it off "
             "too)"),
    cl::init(Fuse::On),
    cl::values(clEnumValN(Fuse::On, "on", "fuse (-tessel-fuse-linear-cross-entropy)"),
               clEnumValN(Fuse::Off, "off", "the head's logits and their gradient whole")),
    cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand), cl::sub(generateCommand),
    cl::sub(estimateCommand), cl::cat(category));
cl::opt<bool> timePasses("time-passes",
                        cl::desc("Print the time each compiler pass took, to stderr (as "
                                 "mlir-opt --mlir-timing)"),
                        cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                        cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the IR after every compiler pass, not only after each "
                                  "stage (slower; for finding a pass that breaks the IR)"),
                         cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                         cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<int64_t> lossChunk("loss-chunk",
                           cl::desc("Rows of logits the fused output head computes at a time "
                                    "(default 0: about the input's size, at least 256 rows)"),
                           cl::init(0), cl::sub(checkCommand), cl::sub(compileCommand),
                           cl::sub(runCommand), cl::sub(generateCommand), cl::sub(estimateCommand),
                           cl::cat(category));

cl::opt<Emit> emit(
    "emit", cl::desc("What to produce (default: an executable with -o, else graph IR on stdout)"),
    cl::init(Emit::Graph),
    cl::values(clEnumValN(Emit::Ast, "ast", "the syntax tree of the file"),
               clEnumValN(Emit::Graph, "graph", "the forward computation in the graph dialect"),
               clEnumValN(Emit::Train, "train",
                          "the training functions (forward-backward, optimizer step, sampler)"),
               clEnumValN(Emit::Sharded, "sharded",
                          "the per-rank functions with their collectives (shard dialect)"),
               clEnumValN(Emit::Plan, "plan", "the memory-planned plan dialect"),
               clEnumValN(Emit::Decode, "decode",
                          "the decode programs over a KV cache (graph dialect)"),
               clEnumValN(Emit::DecodePlan, "decode-plan",
                          "the decode programs, memory-planned (plan dialect)"),
               clEnumValN(Emit::PlanFile, "plan-file", "the binary plan the runtime loads"),
               clEnumValN(Emit::Exe, "exe", "an executable that trains the model")),
    cl::sub(compileCommand), cl::cat(category));
cl::list<int64_t> decodeBatches(
    "decode-batches",
    cl::desc("Batch sizes of the decode programs, one program each (default 1,2,4,8): "
             "generation runs the smallest that holds its sequences"),
    cl::CommaSeparated, cl::sub(compileCommand), cl::sub(runCommand), cl::sub(generateCommand),
    cl::cat(category));
cl::opt<int64_t> prefillTokens("prefill",
                               cl::desc("Prompt tokens the prefill program takes at a time "
                                        "(default 256, at most the model's seq)"),
                               cl::init(256), cl::sub(compileCommand), cl::sub(runCommand),
                               cl::sub(generateCommand), cl::cat(category));
cl::opt<int64_t> kvBlock("kv-block", cl::desc("Positions per KV-cache block (default 16)"),
                         cl::init(16), cl::sub(compileCommand), cl::sub(runCommand),
                         cl::sub(generateCommand), cl::cat(category));
cl::opt<int64_t> kvBlocks("kv-blocks",
                          cl::desc("KV-cache blocks of each attention (default 0: enough for the "
                                   "largest decode batch at the model's whole seq)"),
                          cl::init(0), cl::sub(compileCommand), cl::sub(runCommand),
                          cl::sub(generateCommand), cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Write the output here (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"), cl::sub(compileCommand),
                                cl::cat(category));

} // namespace tessel::driver
