//===- Generate.cpp - Sampling text from a trained model ------------------===//
//
// Trainer.h's generate: the prompts read and encoded, the weights loaded, and the tokens drawn
// through the plan's decode programs over a paged KV cache (KvDecode.h), or by recomputing the
// whole window for each token where the plan has none.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Trainer.h"

#include "runtime/checkpoint/HfWeights.h"
#include "runtime/core/Rng.h"
#include "runtime/host/KernelProfile.h"
#include "runtime/host/KvDecode.h"
#include "runtime/host/ModelState.h"
#include "runtime/host/Pretrained.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/RunSettings.h"
#include "runtime/host/TextCodec.h"
#include "runtime/host/WaitLimits.h"
#include "runtime/pipeline/PipelineReport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessel::rt {

using planfile::Plan;

namespace {

/// The prompts of a generation: --prompt-file's lines (empty lines skipped), else --prompt or
/// --chat's turn. Each has a codec of its own (one tokenizer, loaded once), which decodes its
/// sample.
struct Prompt {
  std::string text;
  std::unique_ptr<TextCodec> codec;
  std::vector<int32_t> ids;
};

bool readPrompts(const Settings &s, const RunOptions &options, const std::string &tokenizerPath,
                 std::vector<Prompt> &prompts, std::string &err) {
  std::vector<std::string> texts;
  if (!options.promptFile.empty()) {
    std::FILE *f = std::fopen(options.promptFile.c_str(), "rb");
    if (!f) {
      err = "cannot read " + options.promptFile + ": " + std::strerror(errno);
      return false;
    }
    std::string line;
    for (int c; (c = std::fgetc(f)) != EOF;) {
      if (c != '\n') {
        line += static_cast<char>(c);
        continue;
      }
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (!line.empty())
        texts.push_back(line);
      line.clear();
    }
    std::fclose(f);
    if (!line.empty())
      texts.push_back(line);
    if (texts.empty()) {
      err = options.promptFile + " holds no prompt (one a line)";
      return false;
    }
  } else {
    texts.push_back(options.prompt);
  }
  std::unique_ptr<TextCodec> codec = TextCodec::create(s.tokenizer, tokenizerPath, s.vocab, err);
  if (!codec)
    return false;
  for (size_t i = 0; i < texts.size(); ++i) {
    Prompt p;
    p.text = texts[i];
    p.codec = codec->fresh();
    const bool given = options.promptGiven || !options.promptFile.empty();
    if (!(options.chat ? p.codec->encodeChat(p.text, options.system, options.chatTemplate, p.ids,
                                             err)
                       : p.codec->encodePrompt(p.text, given, p.ids, err)))
      return false;
    for (int32_t t : p.ids)
      if (t < 0 || t >= s.vocab) {
        err = (texts.size() > 1 ? "prompt " + std::to_string(i + 1) : std::string("the prompt")) +
              " has token " + std::to_string(t) + ", outside the vocabulary of " +
              std::to_string(s.vocab);
        return false;
      }
    prompts.push_back(std::move(p));
  }
  return true;
}

/// Loads the weights generation samples with into `ranks`, which run `plan` (the training plan
/// or its decode plan: both name the parameters alike).
bool loadGenerationWeights(const Plan &plan, const Settings &s, const RunOptions &options,
                           Ranks &ranks, std::string &err) {
  // A checkpoint of this model, or pretrained weights (--init-from), the command line's
  // before the spec's.
  std::string source = !options.checkpoint.empty() ? options.checkpoint
                       : options.initFrom          ? *options.initFrom
                       : !s.checkpointDir.empty()  ? s.checkpointDir
                                                   : s.initFrom;
  if (source.empty()) {
    err = "--generate needs --checkpoint DIR or --init-from DIR (or a checkpoint directory or "
          "init_from in the model's train section)";
    return false;
  }
  const bool pretrained = source != options.checkpoint && source != s.checkpointDir;
  PretrainedLoad report;
  return pretrained && HfWeights::looksLike(source)
             ? loadPretrained(plan, ranks, source, report, err) && refreshWorkingCopies(ranks, err)
             : loadState(plan, ranks, source, /*withOptimizer=*/false, err,
                         /*sameModel=*/!pretrained) != nullptr;
}

/// Generation with the plan's decode programs: prompts prefilled into a paged KV cache, then
/// one token per sequence per step.
int generateWithCache(const Plan &plan, const Settings &s, const RunOptions &options,
                      std::vector<Prompt> &prompts) {
  std::string err;
  const Plan &decoder = *plan.decoder;
  auto ranks = Ranks::create(decoder, computeThreads(options), err, options.device);
  if (!ranks) {
    std::fprintf(stderr, "tessel: error: the decode plan cannot run: %s\n", err.c_str());
    return 1;
  }
  WaitLimits waitLimits(*ranks, options.commTimeout, options.commTimeoutStartup, "decode step");
  waitLimits.unknownPart("start-up and the first decode step");
  auto engine = KvDecoder::create(*ranks, err);
  if (!engine || !loadGenerationWeights(decoder, s, options, *ranks, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (options.profile)
    enableKernelProfile(*ranks);
  std::vector<DecodeRequest> requests;
  for (const Prompt &p : prompts)
    requests.push_back({p.ids, options.tokens});
  const bool streaming = prompts.size() == 1;
  std::vector<std::string> outputs(prompts.size());
  // Each prompt is echoed, so that its output reads as one text; a chat prints the answer.
  const bool given = options.promptGiven || !options.promptFile.empty();
  for (size_t i = 0; i < prompts.size(); ++i)
    if (!options.chat)
      outputs[i] = prompts[i].codec->echo(prompts[i].text, given, prompts[i].ids);
  if (streaming) {
    std::fwrite(outputs[0].data(), 1, outputs[0].size(), stdout);
    std::fflush(stdout);
  }
  Sampling sampling{options.temperature, options.topK, options.topP,
                    static_cast<uint64_t>(options.seed.value_or(static_cast<int64_t>(s.seed)))};
  const int64_t batch = options.batch > 0 ? options.batch : static_cast<int64_t>(prompts.size());
  double lastStep = hostSeconds();
  auto ends = [&](int32_t id) { return prompts[0].codec->endsSample(id); };
  auto emit = [&](size_t i, int32_t id) {
    const std::string text = prompts[i].codec->append(id);
    if (streaming) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    } else {
      outputs[i] += text;
    }
    const double t = hostSeconds();
    waitLimits.regularPartTook(t - lastStep);
    lastStep = t;
  };
  if (!engine->run(requests, batch, sampling, ends, emit, err)) {
    std::fprintf(stderr, "\ntessel: error: %s\n", err.c_str());
    return 1;
  }
  if (streaming)
    std::printf("\n");
  else
    for (const std::string &o : outputs) {
      std::fwrite(o.data(), 1, o.size(), stdout);
      std::fputc('\n', stdout);
    }
  if (!options.quiet) {
    const DecodeStats &st = engine->stats();
    std::fprintf(stderr,
                 "generated %lld tokens for %zu prompt%s (%lld prompt tokens): first token after "
                 "%.3f s; prefill %.0f tokens/s, decode %.1f tokens/s over %lld steps; KV cache "
                 "%.2f MiB at its peak\n",
                 static_cast<long long>(st.newTokens), prompts.size(),
                 prompts.size() == 1 ? "" : "s", static_cast<long long>(st.promptTokens),
                 st.firstTokenSeconds,
                 st.prefillSeconds > 0 ? st.promptTokens / st.prefillSeconds : 0.0,
                 st.decodeSeconds > 0 ? (st.newTokens - static_cast<double>(prompts.size())) /
                                            st.decodeSeconds
                                      : 0.0,
                 static_cast<long long>(st.decodeSteps),
                 static_cast<double>(st.peakBlocks) * engine->geometry().block *
                     engine->geometry().cacheBytesPerToken / (1 << 20));
  }
  // The generated text is the standard output; the profile goes beside the statistics.
  if (options.profile)
    printKernelProfile(*ranks, stderr);
  return 0;
}

} // namespace

int generate(const Plan &plan, const RunOptions &options) {
  std::string err;
  Settings s(plan, options);
  // The prompt first: a mistake in it is found before any weights are read. A pretrained
  // model's tokenizer is found beside its weights.
  std::string tokenizerPath = options.tokenizer;
  if (tokenizerPath.empty() && s.tokenizer == "tokens") {
    const std::string from = options.initFrom ? *options.initFrom : s.initFrom;
    std::error_code ec;
    for (const char *file : {"tokenizer.json", "tokenizer.model"})
      if (tokenizerPath.empty() && !from.empty() &&
          std::filesystem::exists(std::filesystem::path(from) / file, ec))
        tokenizerPath = from;
  }
  std::vector<Prompt> prompts;
  if (!readPrompts(s, options, tokenizerPath, prompts, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (plan.decoder && !options.noKvCache)
    return generateWithCache(plan, s, options, prompts);
  if (prompts.size() > 1) {
    std::fprintf(stderr, "tessel: error: --prompt-file generates with the plan's KV cache%s\n",
                 options.noKvCache ? "; leave out --no-kv-cache"
                 : plan.decoderRefused.empty()
                     ? ", which this plan lacks (compile the model again)"
                     : (", which this model has none of: " + plan.decoderRefused).c_str());
    return 1;
  }
  if (!options.noKvCache && !options.quiet)
    std::fprintf(stderr, "note: generating without a KV cache, the whole window for each token: %s\n",
                 plan.decoderRefused.empty() ? "the plan has no decode programs (compile the "
                                               "model again)"
                                             : plan.decoderRefused.c_str());
  std::vector<int32_t> &context = prompts[0].ids;
  TextCodec *codec = prompts[0].codec.get();
  // Every rank samples: the sample program is SPMD like the others, its logits replicated.
  auto ranks = Ranks::create(plan, computeThreads(options), err, options.device);
  if (!ranks) {
    std::fprintf(stderr, "tessel: error: the plan cannot run: %s\n", err.c_str());
    return 1;
  }
  WaitLimits waitLimits(*ranks, options.commTimeout, options.commTimeoutStartup,
                        "sampled token");
  waitLimits.unknownPart("start-up and the first sampled token");
  const PipelineLayout *pipeline = ranks->pipeline();
  if (pipeline ? !pipeline->chain("sample") : !ranks->firstExecutor().hasProgram("sample")) {
    std::fprintf(stderr, "tessel: error: the plan has no '%s' program\n",
                 pipeline ? "sample.0" : "sample");
    return 1;
  }
  if (!loadGenerationWeights(plan, s, options, *ranks, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (options.profile)
    enableKernelProfile(*ranks);

  // The prompt is echoed, so the output reads as one continuous text (or list of ids).
  // In a chat only the answer is printed.
  const std::string echo =
      options.chat ? std::string() : codec->echo(options.prompt, options.promptGiven, context);
  std::fwrite(echo.data(), 1, echo.size(), stdout);
  Rng rng(options.seed.value_or(static_cast<int64_t>(s.seed)));
  std::vector<float> probs(static_cast<size_t>(s.vocab));
  std::vector<int32_t> window(static_cast<size_t>(s.seq));
  std::vector<float> chained; // A pipeline's logits, from its last stage.
  // The window starts at the last `seq` tokens of a longer prompt; a sequence that outgrows
  // it goes on from its last half, as generation with the KV cache does (KvDecode.h), so that
  // both draw the same tokens.
  size_t start = context.size() > static_cast<size_t>(s.seq) ? context.size() - s.seq : 0;
  for (int64_t n = 0; n < options.tokens; ++n) {
    const double tokenStart = hostSeconds();
    if (context.size() - start > static_cast<size_t>(s.seq))
      start = context.size() - static_cast<size_t>(std::max<int64_t>(1, s.seq / 2));
    int64_t len = static_cast<int64_t>(context.size() - start);
    std::fill(window.begin(), window.end(), 0);
    std::copy(context.end() - len, context.end(), window.begin());
    const StepContext ctx{1, 0, s.seed};
    bool ok = pipeline ? ranks->runForwardChain("sample", ctx, {window, {}}, chained, err)
                       : ranks->writeInput("sample", "tokens", window.data(),
                                           static_cast<int64_t>(window.size()), err) &&
                             ranks->run("sample", ctx, err);
    if (ok && pipeline && static_cast<int64_t>(chained.size()) < s.seq * s.vocab) {
      err = "the last chunk's logits hold " + std::to_string(chained.size()) + " values, not " +
            std::to_string(s.seq * s.vocab);
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "\ntessel: error: %s\n", err.c_str());
      return 1;
    }
    const float *logits =
        (pipeline ? chained.data() : ranks->output("sample", "logits")) + (len - 1) * s.vocab;
    const int32_t next = sampleToken(logits, s.vocab, options.temperature, options.topK,
                                     options.topP, rng, probs);
    context.push_back(next);
    if (codec->endsSample(next))
      break;
    const std::string text = codec->append(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    waitLimits.regularPartTook(hostSeconds() - tokenStart);
  }
  std::printf("\n");
  if (options.profile)
    printKernelProfile(*ranks, stderr);
  return 0;
}

} // namespace tessel::rt
