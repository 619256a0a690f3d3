// The peer of benchmarks/tokenizer_rate.sh: Hugging Face's tokenizers (its Node binding) encoding
// every "text" of a JSON-lines file without special tokens, in one of two configurations:
//   encode  one encode() per document, each awaited before the next
//   batch   one encodeBatch() of all documents (with RAYON_NUM_THREADS=1 it runs on one thread)
// Prints the fastest of REPEATS passes as JSON: documents, bytes, tokens, seconds.
//
//   node tokenizer_rate.js REFERENCE_DIR TOKENIZER_JSON TEXTS_JSONL REPEATS encode|batch
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [reference, tokenizerFile, textsFile, repeats, mode] = process.argv.slice(2);
  const { Tokenizer } = require(path.join(reference, 'node_modules', 'tokenizers'));
  const tokenizer = Tokenizer.fromFile(tokenizerFile);
  const documents = fs.readFileSync(textsFile, 'utf8').split('\n').filter((l) => l)
    .map((l) => JSON.parse(l).text);
  const bytes = documents.reduce((sum, d) => sum + Buffer.byteLength(d), 0);
  let best = Infinity, tokens = 0;
  for (let r = 0; r < Number(repeats); r++) {
    tokens = 0;
    const start = process.hrtime.bigint();
    if (mode === 'batch') {
      for (const e of await tokenizer.encodeBatch(documents, { addSpecialTokens: false }))
        tokens += e.getLength();
    } else {
      for (const d of documents)
        tokens += (await tokenizer.encode(d, null, { addSpecialTokens: false })).getLength();
    }
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  console.log(JSON.stringify({ documents: documents.length, bytes, tokens, seconds: best }));
}

main();
