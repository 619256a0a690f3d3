// Writes the tokenizer.json files the tokenizer tests compare on, made here without any hub:
//
//   gpt2/          GPT-2's vocabulary and merges (from js-tiktoken's ranks, which are GPT-2's
//                  merges in order), GPT-2's ByteLevel pre-tokenizer, <|endoftext|>, and added
//                  tokens with lstrip, rstrip, single_word and normalized set
//   gpt2-prefix/   the same with add_prefix_space and merges as [["a", "b"]] pairs
//   llama3/        Llama 3's layout on cl100k's ranks: a Split pre-tokenizer with Llama 3's
//                  pattern then ByteLevel without its regex, ignore_merges, every split of a
//                  token as a merge (as Llama 3's file lists them), <|begin_of_text|> added by a
//                  TemplateProcessing, and a tokenizer_config.json naming BOS and EOS
//   qwen2/         Qwen2's layout on cl100k's ranks: NFC, Qwen2's pattern, <|im_start|> ...
//   llama2/        (with a SentencePiece BPE model) Llama 2's tokenizer.json: byte fallback,
//                  Prepend and Replace normalizers, <s> added by a TemplateProcessing
//   llama2-metaspace/  the same model with a Metaspace pre-tokenizer and decoder
//
// Usage (as a module): makeTokenizers(referenceDir, outDir, spmModel) where referenceDir holds
// node_modules/js-tiktoken and spmModel (optional) is a SentencePiece BPE model.
'use strict';
const fs = require('fs');
const path = require('path');

const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const LLAMA3_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's bytes_to_unicode.
const BYTE_CHAR = (() => {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) table[b] = String.fromCodePoint(printable(b) ? b : next++);
  return table;
})();
const spell = (bytes) => Array.from(bytes, (b) => BYTE_CHAR[b]).join('');

/** tiktoken ranks as a Map from the bytes (as a latin1 string) to the rank. */
function loadRanks(referenceDir, name) {
  const file = path.join(referenceDir, 'node_modules', 'js-tiktoken', 'dist', 'ranks', name + '.cjs');
  const data = require(file);
  const ranks = new Map();
  for (const line of (data.default || data).bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => ranks.set(Buffer.from(t, 'base64').toString('latin1'), Number(offset) + i));
  }
  return ranks;
}

/** The merge that makes each token, as tiktoken's own BPE would reach it (GPT-2's merges). */
function mergesOnePerToken(ranks) {
  const byRank = [...ranks.entries()].sort((a, b) => a[1] - b[1]);
  const merges = [];
  for (const [token, rank] of byRank) {
    if (token.length < 2) continue;
    let parts = token.split('');
    while (parts.length > 2) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i + 1 < parts.length; i++) {
        const r = ranks.get(parts[i] + parts[i + 1]);
        if (r !== undefined && r < rank && r < bestRank) { best = i; bestRank = r; }
      }
      if (best < 0) break;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
    }
    if (parts.length === 2) merges.push([parts[0], parts[1]]);
  }
  return merges.map(([a, b]) => [spell(Buffer.from(a, 'latin1')), spell(Buffer.from(b, 'latin1'))]);
}

/** Every split of each token into two tokens, in the order Llama 3's converted file has. */
function mergesAllSplits(ranks) {
  const byRank = [...ranks.entries()].sort((a, b) => a[1] - b[1]);
  const merges = [];
  for (const [token] of byRank) {
    const local = [];
    for (let i = 1; i < token.length; i++) {
      const l = token.slice(0, i), r = token.slice(i);
      if (ranks.has(l) && ranks.has(r)) local.push([l, r]);
    }
    local.sort((x, y) => ranks.get(x[0]) - ranks.get(y[0]) || ranks.get(x[1]) - ranks.get(y[1]));
    merges.push(...local);
  }
  return merges.map(([a, b]) => [spell(Buffer.from(a, 'latin1')), spell(Buffer.from(b, 'latin1'))]);
}

function vocabOf(ranks) {
  const vocab = {};
  for (const [token, rank] of ranks) vocab[spell(Buffer.from(token, 'latin1'))] = rank;
  return vocab;
}

const added = (id, content, opts = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false,
  normalized: opts.special === false, special: true, ...opts,
});
const byteLevel = (prefix, regex) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: true, use_regex: regex });
const bpe = (vocab, merges, opts = {}) => ({
  type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
  end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
  vocab, merges, ...opts,
});
const template = (token, id) => ({
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
         { SpecialToken: { id: token, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { [token]: { id: token, ids: [id], tokens: [token] } },
});

function write(outDir, name, json, config) {
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  if (config) fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  return dir;
}

function gpt2Files(referenceDir, outDir) {
  const ranks = loadRanks(referenceDir, 'gpt2');
  const vocab = vocabOf(ranks);
  vocab['<|endoftext|>'] = 50256;
  const merges = mergesOnePerToken(ranks);
  const addedTokens = [
    added(50256, '<|endoftext|>', { normalized: true }),
    added(50257, '<mask>', { lstrip: true, normalized: false }),
    added(50258, '[SEP]', { rstrip: true, normalized: false }),
    added(50259, 'hello world', { special: false, single_word: true, normalized: true }),
    added(50260, '<|extra|>', { special: false, normalized: false }),
    added(27932, 'mask', { special: false, normalized: false, single_word: true }),
  ];
  const base = {
    version: '1.0', truncation: null, padding: null, added_tokens: addedTokens, normalizer: null,
    pre_tokenizer: byteLevel(false, true), post_processor: byteLevel(true, true),
    decoder: byteLevel(true, true),
    model: bpe(vocab, merges.map(([a, b]) => a + ' ' + b)),
  };
  const dirs = [write(outDir, 'gpt2', base)];
  dirs.push(write(outDir, 'gpt2-prefix', {
    ...base, pre_tokenizer: byteLevel(true, true), model: bpe(vocab, merges),
  }));
  return dirs;
}

function cl100kFiles(referenceDir, outDir) {
  const ranks = loadRanks(referenceDir, 'cl100k_base');
  const vocab = vocabOf(ranks);
  const n = ranks.size; // 100256: ids 0 .. 100255
  const llamaSpecials = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
    '<|reserved_special_token_1|>', '<|start_header_id|>', '<|end_header_id|>',
    '<|reserved_special_token_2|>', '<|eot_id|>'];
  const llama3 = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: llamaSpecials.map((t, i) => added(n + i, t)),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_PATTERN }, behavior: 'Isolated', invert: false },
      byteLevel(false, false)] },
    post_processor: { type: 'Sequence', processors: [byteLevel(true, false), template('<|begin_of_text|>', n)] },
    decoder: byteLevel(true, true),
    model: bpe(vocab, mergesAllSplits(ranks), { ignore_merges: true }),
  };
  const chat = "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}";
  const dirs = [write(outDir, 'llama3', llama3, {
    bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>', chat_template: chat,
  })];
  const qwenSpecials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
  const qwen2 = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: qwenSpecials.map((t, i) => added(n + i, t)),
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: QWEN2_PATTERN }, behavior: 'Isolated', invert: false },
      byteLevel(false, false)] },
    post_processor: byteLevel(false, false),
    decoder: byteLevel(false, false),
    model: bpe(vocab, mergesOnePerToken(ranks)),
  };
  dirs.push(write(outDir, 'qwen2', qwen2, {
    bos_token: null, eos_token: { content: '<|im_end|>', __type: 'AddedToken' },
    chat_template: [{ name: 'default', template: chat }],
  }));
  return dirs;
}

/** Llama 2's tokenizer.json from a SentencePiece BPE model's pieces (given as [piece, score]). */
function llama2Files(pieces, outDir) {
  const vocab = {};
  pieces.forEach(([piece], id) => { vocab[piece] = id; });
  // The merges of a SentencePiece BPE model: every split of a piece into two pieces, ordered
  // by the piece's score (its rank), as Hugging Face's converter makes them.
  const merges = [];
  pieces.forEach(([piece, score], id) => {
    const chars = Array.from(piece);
    const local = [];
    for (let i = 1; i < chars.length; i++) {
      const l = chars.slice(0, i).join(''), r = chars.slice(i).join('');
      if (l in vocab && r in vocab) local.push([l, r, score, id]);
    }
    local.sort((x, y) => vocab[x[0]] - vocab[y[0]] || vocab[x[1]] - vocab[y[1]]);
    merges.push(...local);
  });
  merges.sort((x, y) => y[2] - x[2] || x[3] - y[3]);
  const specials = [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')];
  const model = bpe(vocab, merges.map(([a, b]) => [a, b]), {
    unk_token: '<unk>', fuse_unk: true, byte_fallback: true,
  });
  const llama2 = {
    version: '1.0', truncation: null, padding: null, added_tokens: specials,
    normalizer: { type: 'Sequence', normalizers: [
      { type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null,
    post_processor: template('<s>', 1),
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model,
  };
  const config = { bos_token: '<s>', eos_token: '</s>', add_bos_token: true, add_eos_token: false };
  const dirs = [write(outDir, 'llama2', llama2, config)];
  dirs.push(write(outDir, 'llama2-metaspace', {
    ...llama2, normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
    decoder: { type: 'Sequence', decoders: [
      { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
      { type: 'ByteFallback' }, { type: 'Fuse' }] },
  }, config));
  return dirs;
}

module.exports = { gpt2Files, cl100kFiles, llama2Files, GPT2_PATTERN, LLAMA3_PATTERN };
