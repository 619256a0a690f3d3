//===- SemaTrain.cpp - The train section ----------------------------------===//
//
// readTrain reads the `train` section into the program's TrainConfig: the batch and its
// split into micro-batches, the optimizer and learning-rate schedule with their arguments,
// precision, data, evaluation and checkpoints. It runs after the `parallel` section is read:
// the batch is split over the mesh's data axes, so whether it divides evenly, and the
// accumulation steps it leaves, depend on them.
//
//===----------------------------------------------------------------------===//

#include "SemaConfig.h"

#include <algorithm>

using namespace tessel;
using namespace tessel::detail;

void Sema::readTrain(const ast::Section &section) {
  TrainConfig &cfg = program_.train;
  SettingGroup top(*this, section.settings, "train",
                   {"batch", "micro_batch", "accumulation", "steps", "optimizer", "schedule",
                    "clip", "precision", "data", "tokenizer", "seed", "eval", "checkpoint",
                    "log_every", "init_from"});
  auto readInt = [&](const SettingGroup &g, const char *key, Located<int64_t> &out, int64_t min) {
    if (const ast::Expr *e = g.value(key))
      if (auto n = evalInt(*e, key, min))
        out = {*n, e->loc};
  };
  auto readNumber = [&](const ast::Expr &e, const std::string &what, double min,
                        double &out) -> bool {
    Value v = evalConstant(e);
    if (v.isError())
      return false;
    if (!v.isNumber()) {
      error(e.loc, what + " must be a number, not " + kindName(v.kind));
      return false;
    }
    if (v.asDouble() < min) {
      error(e.loc, what + " must be at least " + formatNumber(min) + ", not " +
                       formatNumber(v.asDouble()));
      return false;
    }
    out = v.asDouble();
    return true;
  };
  auto readString = [&](const SettingGroup &g, const char *key, Located<std::string> &out) {
    if (const ast::Expr *e = g.value(key)) {
      if (e->kind != ast::ExprKind::String)
        error(e->loc, std::string(key) + " is a path in double quotes");
      else
        out = {e->text, e->loc};
    }
  };

  readInt(top, "batch", cfg.batch, 1);
  readInt(top, "micro_batch", cfg.microBatch, 1);
  readInt(top, "steps", cfg.steps, 1);
  readInt(top, "seed", cfg.seed, 0);
  readInt(top, "log_every", cfg.logEvery, 1);
  if (!top.get("batch"))
    error(section.kind.loc, "train needs 'batch' (sequences per optimizer step)");
  // At least 1: with batch < dp a micro-batch of 0 left 'batch' without a size, and the
  // check below, which names the real problem, never ran.
  if (!top.get("micro_batch") && cfg.batch.value > 0)
    cfg.microBatch = {std::max<int64_t>(1, cfg.batch.value / program_.parallel.dataWays()),
                      section.kind.loc};
  if (const ast::Expr *e = top.value("clip")) {
    double v = 0;
    if (readNumber(*e, "clip", 0.0, v))
      cfg.clip = {v, e->loc};
  }
  if (const ast::Expr *e = top.value("precision"))
    if (auto w = readWord(*this, *e, "precision", {"fp32", "bf16", "fp16"})) {
      // f16's range (6e-8 to 65504) loses small gradients unless the loss is scaled, which
      // Tessel does not do; bf16 has f32's range. The plan and the devices handle f16 storage
      // (-tessel-mixed-precision precision=fp16), so this is the one place that says no.
      if (*w == "fp16")
        error(e->loc, "precision fp16 needs loss scaling, which Tessel does not do",
              "use bf16: 16-bit like fp16, with fp32's range");
      else
        cfg.precision = {*w, e->loc};
    }
  readString(top, "data", cfg.data);
  readString(top, "init_from", cfg.initFrom);
  if (const ast::Expr *e = top.value("tokenizer"))
    if (auto w = readWord(*this, *e, "tokenizer", {"byte", "tokens"}))
      cfg.tokenizer = {*w, e->loc};

  if (const ast::Expr *e = top.value("optimizer")) {
    std::string kind = e->kind == ast::ExprKind::Call || e->kind == ast::ExprKind::Name ? e->text : "";
    OptimizerConfig &opt = cfg.optimizer;
    opt.loc = e->loc;
    if (kind != "adamw" && kind != "adam" && kind != "sgd") {
      error(e->loc, "unknown optimizer" + (kind.empty() ? "" : " '" + kind + "'"),
            "write adamw(lr = ...), adam(lr = ...) or sgd(lr = ...)");
    } else {
      opt.kind = kind;
      if (kind == "sgd")
        opt.beta1 = opt.beta2 = 0;
      std::vector<std::string> known =
          kind == "sgd" ? std::vector<std::string>{"lr", "momentum", "weight_decay", "decay"}
                        : std::vector<std::string>{"lr", "betas", "eps", "weight_decay", "decay"};
      for (size_t i = 0; i < e->operands.size(); ++i) {
        const std::string &key = e->keys[i];
        const ast::Expr &arg = *e->operands[i];
        if (key.empty()) {
          error(arg.loc, "optimizer arguments are named: " + kind + "(lr = 1e-3)");
          continue;
        }
        if (std::find(known.begin(), known.end(), key) == known.end()) {
          std::string guess = closestMatch(key, known);
          error(e->keyLocs[i], "'" + kind + "' has no argument '" + key + "'",
                guess.empty() ? "" : "did you mean '" + guess + "'?");
          continue;
        }
        if (key == "decay") {
          // A class, a group of them, or a tuple of those: decay = matrices,
          // decay = (weights, gains).
          std::vector<const ast::Expr *> items;
          if (arg.kind == ast::ExprKind::Tuple)
            for (const auto &item : arg.operands)
              items.push_back(item.get());
          else
            items.push_back(&arg);
          bool chosen[4] = {false, false, false, false};
          const char *classes[4] = {"weights", "embeddings", "gains", "biases"};
          bool ok = true;
          for (const ast::Expr *item : items) {
            std::optional<std::string> word =
                readWord(*this, *item, "parameter class",
                         {"matrices", "weights", "embeddings", "gains", "biases", "all"});
            ok &= word.has_value();
            for (int c = 0; word && c < 4; ++c)
              chosen[c] |= *word == classes[c] || *word == "all" ||
                           (*word == "matrices" && c < 2);
          }
          if (ok) {
            opt.decay.clear();
            for (int c = 0; c < 4; ++c)
              if (chosen[c])
                opt.decay.push_back(classes[c]);
          }
          continue;
        }
        if (key == "betas") {
          Value v = evalConstant(arg);
          if (v.isError())
            continue;
          if (v.kind != Value::Tuple || v.elems.size() != 2 || !v.elems[0].isNumber() ||
              !v.elems[1].isNumber()) {
            error(arg.loc, "betas is a pair: betas = (0.9, 0.95)");
            continue;
          }
          opt.beta1 = v.elems[0].asDouble();
          opt.beta2 = v.elems[1].asDouble();
          if (opt.beta1 < 0 || opt.beta1 >= 1 || opt.beta2 < 0 || opt.beta2 >= 1)
            error(arg.loc, "betas must lie in [0, 1)");
          continue;
        }
        double v = 0;
        if (!readNumber(arg, key, 0.0, v))
          continue;
        // The ranges the optimizer's update needs (the graph dialect's verifiers hold the
        // same), so that a spec check accepts always compiles.
        if (key == "eps" && !(v > 0)) {
          error(arg.loc, "eps must be greater than 0, not " + formatNumber(v),
                "eps keeps the update finite where a second moment is 0; 1e-8 is usual");
          continue;
        }
        if (key == "momentum" && v >= 1) {
          error(arg.loc, "momentum must lie in [0, 1), not " + formatNumber(v));
          continue;
        }
        if (key == "weight_decay" && kind == "adam" && v > 0) {
          error(arg.loc, "adam with weight_decay (coupled, L2) is not supported yet",
                "use adamw(...), whose weight decay is decoupled");
          continue;
        }
        if (key == "lr")
          opt.lr = v;
        else if (key == "eps")
          opt.eps = v;
        else if (key == "weight_decay")
          opt.weightDecay = v;
        else if (key == "momentum")
          opt.momentum = v;
      }
    }
  }

  if (const ast::Expr *e = top.value("schedule")) {
    std::string kind = e->kind == ast::ExprKind::Call || e->kind == ast::ExprKind::Name ? e->text : "";
    LrSchedule &s = cfg.schedule;
    s.loc = e->loc;
    if (kind != "constant" && kind != "cosine" && kind != "linear") {
      error(e->loc, "unknown learning-rate schedule" + (kind.empty() ? "" : " '" + kind + "'"),
            "write constant, cosine(warmup = 100, min_lr = 1e-5) or linear(warmup = 100)");
    } else {
      s.kind = kind;
      for (size_t i = 0; i < e->operands.size(); ++i) {
        const std::string &key = e->keys[i];
        const ast::Expr &arg = *e->operands[i];
        if (key == "warmup") {
          if (auto n = evalInt(arg, "warmup", 0))
            s.warmup = *n;
        } else if (key == "min_lr") {
          readNumber(arg, "min_lr", 0.0, s.minLr);
        } else {
          error(key.empty() ? arg.loc : e->keyLocs[i],
                key.empty() ? "schedule arguments are named: cosine(warmup = 100)"
                            : "'" + kind + "' has no argument '" + key + "'",
                "known: warmup, min_lr");
        }
      }
    }
  }

  if (const auto *eval = top.group("eval")) {
    SettingGroup g(*this, *eval, "eval", {"every", "batches", "fraction", "data"});
    readInt(g, "every", cfg.evalEvery, 1);
    readInt(g, "batches", cfg.evalBatches, 1);
    readString(g, "data", cfg.evalData);
    const ast::Expr *fraction = g.value("fraction");
    if (fraction && g.value("data"))
      error(fraction->loc, "eval.fraction holds part of the training data out, but eval.data "
                           "names separate validation data",
            "keep one of the two");
    else if (const ast::Expr *e = fraction) {
      double v = 0;
      if (readNumber(*e, "fraction", 0.0, v)) {
        if (v >= 1.0)
          error(e->loc, "fraction is the held-out share of the data, below 1");
        else if (v == 0.0 && cfg.evalEvery.value > 0 && cfg.evalData.value.empty())
          error(e->loc, "eval.every evaluates, but a fraction of 0 holds no data out to evaluate on",
                "hold some out (fraction = 0.01) or name validation data (data = \"val.bin\")");
        else
          cfg.evalFraction = {v, e->loc};
      }
    }
  }
  if (const auto *ckpt = top.group("checkpoint")) {
    SettingGroup g(*this, *ckpt, "checkpoint", {"every", "dir"});
    readInt(g, "every", cfg.checkpointEvery, 1);
    readString(g, "dir", cfg.checkpointDir);
  }

  // batch = micro_batch x accumulation x dp (x ep, which splits the tokens too), exactly.
  int64_t dp = program_.parallel.axisSize("dp"), ep = program_.parallel.axisSize("ep");
  std::string dataAxes =
      ep > 1 ? " x dp (" + std::to_string(dp) + ") x ep (" + std::to_string(ep) + ")"
             : " x dp (" + std::to_string(dp) + ")";
  if (cfg.batch.value > 0 && cfg.microBatch.value > 0) {
    int64_t perStep = cfg.microBatch.value * dp * ep;
    if (cfg.batch.value % perStep != 0) {
      error(cfg.batch.loc,
            "batch " + std::to_string(cfg.batch.value) + " is not a multiple of micro_batch (" +
                std::to_string(cfg.microBatch.value) + ")" + dataAxes,
            std::string("batch = micro_batch x accumulation x dp") + (ep > 1 ? " x ep" : "") +
                "; try batch = " +
                std::to_string(std::max<int64_t>(1, cfg.batch.value / perStep) * perStep));
    } else {
      cfg.accumulation = cfg.batch.value / perStep;
    }
    if (const ast::Expr *e = top.value("accumulation"))
      if (auto n = evalInt(*e, "accumulation", 1))
        if (cfg.batch.value % perStep == 0 && *n != cfg.accumulation)
          error(e->loc,
                "accumulation " + std::to_string(*n) + " disagrees with batch / (micro_batch" +
                    (ep > 1 ? " x dp x ep" : " x dp") + ") = " + std::to_string(cfg.accumulation));
  }
}
