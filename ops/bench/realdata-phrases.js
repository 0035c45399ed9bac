#!/usr/bin/env node
// realdata-phrases.js - the phrase library of the real-data benchmark
// (ops/bench/realdata.sh), read from Debian-packaged word lists and
// dictionaries.
//
//   node realdata-phrases.js OUT.txt > counts.txt
//
// Sources, each read only if it is installed (the counts say which were):
//   words    every line of the /usr/share/dict word lists of nine languages
//            (wamerican-insane, wbritish-insane, wngerman, wfrench,
//            wspanish, witalian, wdutch, wportuguese, wswedish);
//   wn-lemma WordNet 3.0 lemmas of two or more words (wordnet-base's
//            index.noun/verb/adj/adv, '_' read as a space);
//   wn-gloss clauses of WordNet's glosses and usage examples (data.*);
//   gcide-hw GCIDE headwords of two or more words (dict-gcide's index);
//   gcide    clauses of GCIDE's definitions and quotations (the 1913
//            Webster and its supplements), markup removed.
// A clause is a run of text between punctuation marks (. , ; : ! ? ( ) [ ]
// and quotes), kept when it has 2 to 8 words made only of letters,
// apostrophes and hyphens, and then with its first letter lowercased
// unless the first word is an acronym (all capitals, two letters or more),
// so that a clause which began a sentence joins the same clause found
// mid-sentence.  Every phrase is trimmed,
// its inner white space squeezed to one space, and kept once: the first
// source in the order above that has it counts it.  The output is
// sorted by code unit (the order of JavaScript's sort), one phrase a
// line, so the same installed packages always give the same file.
'use strict';
const fs = require('fs');
const zlib = require('zlib');

const out = process.argv[2];
if (!out) {
    process.stderr.write('usage: node realdata-phrases.js OUT.txt\n');
    process.exit(2);
}

const seen = new Set();
const counts = [];

function add(src, p) {
    p = p.replace(/\s+/g, ' ').trim();
    if (p.length === 0 || p.length > 200 || seen.has(p))
        return;
    seen.add(p);
    src.kept++;
}

function source(name) {
    const s = { name, files: 0, kept: 0 };
    counts.push(s);
    return s;
}

// text decodes a file as UTF-8, or as ISO-8859-1 where it is not valid
// UTF-8 (Debian's Swedish list is still Latin-1).
function text(b) {
    try {
        return new TextDecoder('utf-8', { fatal: true }).decode(b);
    } catch (e) {
        return b.toString('latin1');
    }
}

function readIf(path, src) {
    try {
        const b = fs.readFileSync(path);
        src.files++;
        return text(path.endsWith('.dz') ? zlib.gunzipSync(b) : b);
    } catch (e) {
        if (e.code === 'ENOENT')
            return null;
        throw e;
    }
}

const WORD = /^[\p{L}][\p{L}'\u2019-]*$/u;

// clauses splits running text at punctuation and keeps the runs that look
// like phrases (see the header).
function clauses(src, text) {
    for (const c of text.split(/[.,;:!?()\[\]{}"\u201c\u201d`]+|--| - /u)) {
        const w = c.trim().split(/\s+/);
        if (w.length < 2 || w.length > 8 || !w.every(x => WORD.test(x)))
            continue;
        if (w[0].length === 1 || w[0] !== w[0].toUpperCase())
            w[0] = w[0].charAt(0).toLowerCase() + w[0].slice(1);
        add(src, w.join(' '));
    }
}

// 1. Word lists.
{
    const s = source('words');
    for (const f of ['american-english-insane', 'british-english-insane', 'ngerman', 'french',
                     'spanish', 'italian', 'dutch', 'portuguese', 'swedish']) {
        const t = readIf('/usr/share/dict/' + f, s);
        if (t !== null)
            for (const line of t.split('\n'))
                add(s, line);
    }
}

const WN = '/usr/share/wordnet/';
const POS = ['noun', 'verb', 'adj', 'adv'];

// 2. WordNet multi-word lemmas: the first field of each index line.
{
    const s = source('wn-lemma');
    for (const p of POS) {
        const t = readIf(WN + 'index.' + p, s);
        if (t === null)
            continue;
        for (const line of t.split('\n')) {
            if (line.startsWith(' ') || line.length === 0)
                continue;
            const lemma = line.slice(0, line.indexOf(' '));
            if (lemma.includes('_'))
                add(s, lemma.replace(/_/g, ' '));
        }
    }
}

// 3. WordNet glosses: the text after " | " on each data line.
{
    const s = source('wn-gloss');
    for (const p of POS) {
        const t = readIf(WN + 'data.' + p, s);
        if (t === null)
            continue;
        for (const line of t.split('\n')) {
            const i = line.indexOf(' | ');
            if (!line.startsWith(' ') && i >= 0)
                clauses(s, line.slice(i + 3));
        }
    }
}

// 4. GCIDE multi-word headwords: the first tab-separated field of the index.
{
    const s = source('gcide-hw');
    const t = readIf('/usr/share/dictd/gcide.index', s);
    if (t !== null)
        for (const line of t.split('\n')) {
            const hw = line.slice(0, line.indexOf('\t'));
            if (hw.includes(' ') && !hw.startsWith('00-database'))
                add(s, hw);
        }
}

// 5. GCIDE body text.  Markup goes first: \Pro*nun"ci*a`tion\ blocks,
// {cross references} keep their words, [bracketed notes] (etymologies,
// "[1913 Webster]", "[Obs.]") and "--Author" attributions go whole.
{
    const s = source('gcide');
    const t = readIf('/usr/share/dictd/gcide.dict.dz', s);
    if (t !== null)
        for (const para of t.split(/\n\s*\n/)) {
            const x = para.replace(/\\[^\\\n]*\\/g, ' ')
                          .replace(/\[[^\]]*\]/g, ' ')
                          .replace(/--[A-Z][\w. ]*/g, ' ')
                          .replace(/[{}]/g, '')
                          .replace(/\s+/g, ' ');
            clauses(s, x);
        }
}

const all = Array.from(seen);
all.sort();
fs.writeFileSync(out, all.length ? all.join('\n') + '\n' : '');
for (const s of counts)
    process.stdout.write(`${s.name}: ${s.kept} phrases from ${s.files} files\n`);
process.stdout.write(`total: ${all.length} distinct phrases\n`);
