// Tessel's tokenizers against Hugging Face's tokenizers (its Node binding), on held-out text.
//
//   node parity.js --reference DIR --tool TESSEL_TOKENIZE_TEXTS --work DIR --root TESSEL_ROOT
//
// DIR holds node_modules/tokenizers and node_modules/js-tiktoken
// (scripts/install-tokenizer-reference.sh). The tokenizer files are made here
// (make_tokenizers.js; a SentencePiece BPE model is trained with spm_train for the Llama 2
// ones); the texts are written as files, one text each, and read as the reference's binding
// reads text: decoded from UTF-8 with invalid bytes replaced. For every tokenizer and text the
// ids without and with special tokens, and the decodings of the latter with and without
// special tokens, must be identical; then random id sequences are decoded by both. Prints what
// was compared and every difference; exits 1 on any.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const make = require('./make_tokenizers.js');

function parseArgs() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const key of ['reference', 'tool', 'work', 'root'])
    if (!out[key]) throw new Error('missing --' + key);
  return out;
}

/** A seeded generator (mulberry32), so the random texts are the same on every run. */
function random(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPECIALS = ['<|endoftext|>', '<mask>', '[SEP]', 'hello world', '<|extra|>', 'mask',
  '<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>',
  '<|im_start|>', '<|im_end|>', '<s>', '</s>', '<unk>'];

/** The held-out texts, as bytes. */
function makeTexts(root) {
  const texts = [];
  const add = (s) => texts.push(Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8'));
  // Written by hand: what each part of a tokenizer must get right.
  [
    '', ' ', 'a', 'Hello world', 'Hello, world! How are you doing today?',
    "I'm sure they'll say it's what we've done; DON'T, I'D, YOU'LL, 'S 'ſ 'Ve",
    'a    b', '   leading spaces', 'trailing spaces   ', 'tabs\t\tand\tmore\t',
    'line\nbreaks\n\n\nand\r\nwindows\r\n\r\nlines', '\n\n\n', ' \n \n ', '\u00a0\u00a0nbsp',
    'ideographic\u3000space and\u2028line\u2029separators\u0085next line',
    'mongolian\u180evowel separator, zero\u200bwidth, bom\ufeffhere',
    'control \u0000 nul \u0001 \u001b[31mred\u001b[0m \u007f',
    '12345678901234567890', '3.14159 2,718 1,000,000 +1 (555) 010-9999', '2024-05-20T12:34:56Z',
    'phone: ١٢٣٤٥ and ४२ and ໓໔ full-width １２３',
    '👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 😀😃😄 🤖',
    '中文文本：你好，世界！这是一个测试。', '日本語のテキスト、ひらがな、カタカナ、漢字。ｆｕｌｌｗｉｄｔｈ',
    '한국어 텍스트입니다. 안녕하세요!', '\u1100\u1161\u11a8 decomposed hangul \u1112\u1161\u11ab',
    'e\u0301 cafe\u0301 a\u0308\u0304 o\u0323\u0302 \u1e9b\u0323 Å Å Å',
    'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǵ̗̯̹ó̗͔̈ͮ text',
    'Tiếng Việt có dấu: người, được, những',
    'العربية: مرحبا بالعالم', 'עִבְרִית: שָׁלוֹם', 'हिन्दी: नमस्ते दुनिया', 'ไทย: สวัสดีชาวโลก',
    'Ελληνικά: Καλημέρα κόσμε', 'Русский: Привет, мир!', 'ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ',
    'new letters: \u{1c89}\u{1c8a} \u{31350}\u{31351} \u{105c0} digits \u{1e5f1}\u{16130}',
    'def f(x):\n    return x ** 2  # square\n\n\tif x:\n\t\tpass\n',
    'https://example.com/path?q=1&r=two#frag user@example.org',
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    'hello<|endoftext|>world', '<|endoftext|><|endoftext|>', ' <|endoftext|> ', '<|endoftext',
    'x <mask> y', 'x   <mask>   y', 'a[SEP]   b', 'say hello world now', 'sayhello worldnow',
    'mask masks unmask <mask>mask', '<|extra|><|extra|>x',
    '<|begin_of_text|>Hi<|eot_id|>', ' <|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>',
    '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>',
    '<s>bos inside</s> and <unk> too', '<s><s>', '</s>',
    'a'.repeat(1000), ' '.repeat(1000) + 'x', '\n'.repeat(300) + 'end', '!!!???...,,,' .repeat(50),
    '0'.repeat(500), 'ab'.repeat(400), '🙂'.repeat(200),
  ].forEach(add);
  // Invalid UTF-8: what the reference's binding sees as U+FFFD.
  [
    [0x61, 0x62, 0x63, 0xff, 0xfe, 0x64, 0x65, 0x66],
    [0xc3, 0x28, 0x20, 0xa0, 0xa1],
    [0xe2, 0x82],
    [0x41, 0xe2, 0x82, 0x42],
    [0xed, 0xa0, 0x80, 0xed, 0xbf, 0xbf],
    [0xc0, 0xaf, 0xc1, 0xbf, 0xe0, 0x80, 0xaf],
    [0xf4, 0x90, 0x80, 0x80, 0xf8, 0x88, 0x80, 0x80, 0x80],
    [0x80, 0x80, 0xbf, 0x20, 0x68, 0x69],
    [0xf0, 0x9f, 0x98, 0x20, 0xf0, 0x9f, 0x98, 0x80],
    [0x3c, 0x7c, 0x65, 0x6e, 0x64, 0x6f, 0x66, 0x74, 0x65, 0x78, 0x74, 0x7c, 0x3e, 0xff, 0x3c, 0x73, 0x3e],
  ].forEach((bytes) => add(Buffer.from(bytes)));
  // Real text: the repository's prose and some fortunes (held out from the SentencePiece model's
  // training text).
  const prose = fs.readFileSync(path.join(root, 'test', 'Integration', 'Parity', 'Inputs', 'text.txt'));
  add(prose);
  for (const name of ['computers', 'linux', 'science']) {
    const file = path.join('/usr/share/games/fortunes', name);
    if (fs.existsSync(file))
      for (const fortune of fs.readFileSync(file, 'utf8').split('\n%\n').slice(0, 400)) add(fortune);
  }
  // Random strings over the characters above and the tokens of every file.
  const rand = random(20240520);
  const pools = [
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', " '.,;:!?-_()[]{}<>|/\\\"#$%&*+=@^`~",
    ' \t\n\r\u000b\u000c\u0085\u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\u180e\u200b\ufeff',
    'àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßſ', '\u0300\u0301\u0302\u0303\u0308\u0323\u0327\u0345\u05b4\u0651',
    '中文字測試日本語ひらがなカタカナ한국어', '\u1100\u1161\u11a8\u1112\u1161\u11ab', 'αβγδεжзийклمرحباनमस्ते',
    '😀👍🏽❤️🇫🇷\u200d', '\u{1c89}\u{31350}\u{1e5f1}\u{16130}', "'s'S'ſ'll'LL've'd'm",
  ];
  for (let i = 0; i < 400; i++) {
    let s = '';
    const length = 1 + Math.floor(rand() * 120);
    while (Array.from(s).length < length) {
      if (rand() < 0.04) { s += SPECIALS[Math.floor(rand() * SPECIALS.length)]; continue; }
      const pool = Array.from(pools[Math.floor(rand() * pools.length)]);
      s += pool[Math.floor(rand() * pool.length)];
    }
    add(s);
  }
  return texts;
}

function trainSentencePiece(work, root) {
  const dir = path.join(work, 'spm');
  fs.mkdirSync(dir, { recursive: true });
  const corpus = path.join(dir, 'corpus.txt');
  const parts = [];
  for (const name of ['fortunes', 'wisdom', 'people', 'literature', 'riddles', 'goedel'])
    if (fs.existsSync('/usr/share/games/fortunes/' + name))
      parts.push(fs.readFileSync('/usr/share/games/fortunes/' + name, 'utf8'));
  parts.push('中文文本：你好，世界！日本語のテキスト。한국어 텍스트입니다. Привет, мир! 👍🏽 café');
  fs.writeFileSync(corpus, parts.join('\n'));
  const prefix = path.join(dir, 'llama2');
  const run = spawnSync('spm_train', ['--input=' + corpus, '--model_prefix=' + prefix,
    '--model_type=bpe', '--vocab_size=3000', '--byte_fallback=true', '--split_digits=true',
    '--normalization_rule_name=identity', '--remove_extra_whitespaces=false',
    '--allow_whitespace_only_pieces=true', '--character_coverage=0.9995',
    '--num_threads=1', '--minloglevel=2'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error('spm_train failed: ' + run.stderr);
  const vocab = spawnSync('spm_export_vocab', ['--model=' + prefix + '.model'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (vocab.status !== 0) throw new Error('spm_export_vocab failed: ' + vocab.stderr);
  const pieces = vocab.stdout.split('\n').filter((l) => l).map((l) => {
    const tab = l.lastIndexOf('\t');
    return [l.slice(0, tab), Number(l.slice(tab + 1))];
  });
  return { model: prefix + '.model', pieces };
}

function runTool(tool, args) {
  const run = spawnSync(tool, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  if (run.status !== 0) throw new Error(tool + ' ' + args.slice(0, 2).join(' ') + ' failed: ' + run.stderr);
  return run.stdout.split('\n').filter((l) => l).map((l) => JSON.parse(l));
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const show = (s) => JSON.stringify(s).slice(0, 300);

async function main() {
  const args = parseArgs();
  const { Tokenizer } = require(path.join(args.reference, 'node_modules', 'tokenizers'));
  const version = require(path.join(args.reference, 'node_modules', 'tokenizers', 'package.json')).version;
  fs.mkdirSync(args.work, { recursive: true });
  const spm = trainSentencePiece(args.work, args.root);
  const filesDir = path.join(args.work, 'tokenizers');
  const dirs = [...make.gpt2Files(args.reference, filesDir), ...make.cl100kFiles(args.reference, filesDir),
    ...make.llama2Files(spm.pieces, filesDir)];
  const texts = makeTexts(args.root);
  const textDir = path.join(args.work, 'texts');
  fs.mkdirSync(textDir, { recursive: true });
  const files = texts.map((t, i) => {
    const f = path.join(textDir, String(i).padStart(5, '0') + '.txt');
    fs.writeFileSync(f, t);
    return f;
  });
  let failures = 0, totalTexts = 0, totalTokens = 0, totalDecodes = 0;
  const report = (name, what) => {
    failures++;
    if (failures <= 40) console.log('MISMATCH ' + name + ': ' + what);
  };
  for (const dir of dirs) {
    const name = path.basename(dir);
    const ref = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const ours = runTool(args.tool, ['--tokenizer', dir, ...files]);
    let tokens = 0;
    for (let i = 0; i < texts.length; i++) {
      const text = texts[i].toString('utf8');
      const plain = (await ref.encode(text, null, { addSpecialTokens: false })).getIds();
      const special = (await ref.encode(text, null, { addSpecialTokens: true })).getIds();
      const decoded = await ref.decode(special, false);
      const decodedSkip = await ref.decode(special, true);
      const o = ours[i];
      const label = name + ' text ' + i + ' ' + show(text.slice(0, 60));
      if (!o) { report(label, 'no output from Tessel'); continue; }
      if (!same(o.ids, plain)) report(label, 'ids\n  reference ' + show(plain) + '\n  tessel    ' + show(o.ids));
      if (!same(o.ids_special, special)) report(label, 'ids with special tokens\n  reference ' + show(special) + '\n  tessel    ' + show(o.ids_special));
      if (o.decoded !== decoded) report(label, 'decoded\n  reference ' + show(decoded) + '\n  tessel    ' + show(o.decoded));
      if (o.decoded_skip !== decodedSkip) report(label, 'decoded, special skipped\n  reference ' + show(decodedSkip) + '\n  tessel    ' + show(o.decoded_skip));
      tokens += special.length;
    }
    // Decoding alone: random ids, byte tokens out of order (invalid UTF-8), special tokens and
    // ids beyond the vocabulary.
    const size = ref.getVocabSize(true);
    const rand = random(size);
    const sequences = [];
    for (let k = 0; k < 200; k++) {
      const n = 1 + Math.floor(rand() * 30), ids = [];
      for (let j = 0; j < n; j++) {
        const r = rand();
        ids.push(r < 0.5 ? Math.floor(rand() * 300) : r < 0.9 ? Math.floor(rand() * size) : size - 1 - Math.floor(rand() * 12) + (r > 0.98 ? 40 : 0));
      }
      sequences.push(ids);
    }
    const idsFile = path.join(args.work, name + '-ids.json');
    fs.writeFileSync(idsFile, JSON.stringify(sequences));
    const decodedOurs = runTool(args.tool, ['--tokenizer', dir, '--decode', idsFile]);
    for (let k = 0; k < sequences.length; k++) {
      const d = await ref.decode(sequences[k], false), ds = await ref.decode(sequences[k], true);
      const o = decodedOurs[k] || {};
      if (o.decoded !== d || o.decoded_skip !== ds)
        report(name + ' decode ' + show(sequences[k]), '\n  reference ' + show([d, ds]) + '\n  tessel    ' + show([o.decoded, o.decoded_skip]));
    }
    console.log(name + ': ' + texts.length + ' texts, ' + tokens + ' tokens, ' + sequences.length + ' id sequences decoded');
    totalTexts += texts.length;
    totalTokens += tokens;
    totalDecodes += sequences.length;
  }
  console.log('compared with tokenizers ' + version + ' (Node binding): ' + dirs.length + ' tokenizers, ' +
    totalTexts + ' texts, ' + totalTokens + ' tokens, ' + totalDecodes + ' decodings');
  if (failures) {
    console.log('FAILED: ' + failures + ' mismatches');
    process.exit(1);
  }
  console.log('parity: identical');
}

main().catch((e) => { console.log('FAILED: ' + (e.stack || e)); process.exit(1); });
