#!/usr/bin/env python3
"""Trains switchyard's scene classifier (contract §11, "Scene classification").

    python3 crates/switchyard/src/classify/train.py [--compare]

Python 3 standard library only. Reads data/scenes.jsonl beside this file,
trains on the lines marked "train", and writes:

* model.bin beside this file: the model `classify.rs` includes in the binary
  (format below);
* data/predictions.test.txt: the label the written (quantized) model gives
  each "test" line, in file order, one a line — the Rust tests check that
  `classify` gives the same, so both sides compute the same features;

and prints macro-F1 on the train and held-out (test) lines: overall, per
language and per label.

Features (classify.rs computes exactly these). A prompt longer than 2 KiB is
read as two windows, its first and its last 1 KiB (cut at UTF-8 character
boundaries); n-grams do not cross from one window to the other. In each
window, characters are of four kinds:
* word: ASCII letters, digits and '_', Latin-1/Latin Extended-A/B letters
  (U+00C0..U+024F but for × and ÷), Greek, Cyrillic (U+0370..U+052F) and
  Latin Extended Additional (U+1E00..U+1EFF). A run of them is a word,
  lowercased in ASCII (other letters kept as they are) with every ASCII
  digit read as '0';
* CJK: kana, CJK ideographs (and extension A, B.., compatibility) and Hangul
  syllables;
* space: ' ', \\t, \\n, \\r, \\v, \\f, U+00A0, U+3000;
* symbol: everything else (punctuation, operators, emoji, controls).
Features, each a byte string hashed with FNV-1a 64 and reduced to a bucket
(hash & (buckets - 1)); one per occurrence:
* b"w" + word; b"p" + its first 5 bytes when it is longer than 5 bytes
  (a cheap stem: translate/translation, extract/extraction);
  b"b" + previous word + b" " + word (the previous word of the
  window, spaces and symbols between them allowed; a CJK character breaks
  the chain);
* b"c" + CJK char; b"d" + two CJK chars next to each other;
* b"s" + symbol; b"t" + two symbols next to each other;
* once per prompt, shapes: b"len0".."len5" (the whole prompt's UTF-8 length:
  < 16, < 64, < 256, < 1024, < 4096, more), b"nl0".."nl3" (newlines in the
  windows: 0, 1-2, 3-9, 10+), b"fence" (three backticks in a row),
  b"indent" (a line starting with 4 spaces or a tab), b"cjk" (any CJK
  char), b"q" (the last non-space char is '?' or '？').
A prompt's vector is each bucket's count divided by sqrt(number of
features). The model is linear: score(label) = bias + weights · vector.

Model: multinomial logistic regression trained by SGD (L2, fixed seed, the
examples shuffled each epoch), or complement naive Bayes; `--compare`
cross-validates both on the train lines (5 folds, a few settings each) and
scores each on the held-out lines. Logistic regression with L2 1e-5 ties
the best naive Bayes on cross-validation and is what this script writes:
its scores are logits, so the margin between the top two labels means
something (data/README.md has the table).

model.bin (little-endian):
    0  4  magic b"SYSC"
    4  2  version (1)
    6  2  label count L (8)
    8  4  bucket count B (a power of two)
   12  4  window bytes W (1024: prompts over 2W are read as first W + last W)
   16  4  scale (f32): a weight unit in logits (information only)
   20     L labels: u8 length + ASCII name, in score order
          L biases: i32, in weight units
          B × L weights: i8, bucket-major (bucket 0's L weights, then 1's ..)
A prompt's label is the first label with the highest
bias + (sum of its features' weights) / sqrt(features), computed in f64
(Python and Rust round the same way).
"""

import json
import math
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "scenes.jsonl")
MODEL = os.path.join(HERE, "model.bin")
PREDICTIONS = os.path.join(HERE, "data", "predictions.test.txt")

LABELS = ["code", "math", "creative", "fact_qa", "planning", "chat", "translation", "extraction"]
BUCKET_BITS = 14
WINDOW = 1024
SEED = 20240611

# SGD settings (L2 chosen by --compare's cross-validation on the train lines).
EPOCHS = 40
ETA0 = 0.5
L2 = 1e-5

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a(data, h=FNV_OFFSET):
    for x in data:
        h = ((h ^ x) * FNV_PRIME) & MASK64
    return h


SPACES = {0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C, 0xA0, 0x3000}


def is_word(cp):
    if cp < 0x80:
        return 0x30 <= cp <= 0x39 or 0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A or cp == 0x5F
    return (
        (0xC0 <= cp <= 0x24F and cp != 0xD7 and cp != 0xF7)
        or 0x370 <= cp <= 0x52F
        or 0x1E00 <= cp <= 0x1EFF
    )


def is_cjk(cp):
    return (
        0x3040 <= cp <= 0x30FF
        or 0x3400 <= cp <= 0x4DBF
        or 0x4E00 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7AF
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x2FFFF
    )


def norm(word):
    """A word's bytes as hashed: ASCII lowercased, ASCII digits as '0'."""
    out = bytearray(word.encode("utf-8"))
    for i, x in enumerate(out):
        if 0x41 <= x <= 0x5A:
            out[i] = x + 32
        elif 0x30 <= x <= 0x39:
            out[i] = 0x30
    return bytes(out)


def windows(text):
    """The text, or its first and last WINDOW bytes when over 2 × WINDOW."""
    b = text.encode("utf-8")
    if len(b) <= 2 * WINDOW:
        return [text]
    head = WINDOW
    while b[head] & 0xC0 == 0x80:
        head -= 1
    tail = len(b) - WINDOW
    while b[tail] & 0xC0 == 0x80:
        tail += 1
    return [b[:head].decode("utf-8"), b[tail:].decode("utf-8")]


def bucket_of(n, bounds):
    for i, bound in enumerate(bounds):
        if n < bound:
            return i
    return len(bounds)


def features(text):
    """The feature strings of a prompt, one per occurrence."""
    out = []
    newlines = 0
    fence = indent = cjk = False
    last = None
    for seg in windows(text):
        prev_word = None
        prev_cjk = prev_sym = None
        word = []
        ticks = 0
        line_start, lead = True, 0

        def flush():
            nonlocal prev_word, prev_cjk, prev_sym
            w = norm("".join(word))
            out.append(b"w" + w)
            if len(w) > 5:
                out.append(b"p" + w[:5])
            if prev_word is not None:
                out.append(b"b" + prev_word + b" " + w)
            prev_word = w
            prev_cjk = prev_sym = None
            word.clear()

        for ch in seg:
            cp = ord(ch)
            # shapes
            if cp == 0x0A:
                newlines += 1
                line_start, lead = True, 0
            elif line_start:
                if cp == 0x20:
                    lead += 1
                    if lead >= 4:
                        indent = True
                elif cp == 0x09:
                    indent = True
                else:
                    line_start = False
            ticks = ticks + 1 if cp == 0x60 else 0
            if ticks >= 3:
                fence = True
            if cp not in SPACES:
                last = cp
            # n-grams
            if is_word(cp):
                word.append(ch)
                continue
            if word:
                flush()
            if is_cjk(cp):
                cjk = True
                c = ch.encode("utf-8")
                out.append(b"c" + c)
                if prev_cjk is not None:
                    out.append(b"d" + prev_cjk + c)
                prev_cjk = c
                prev_word = prev_sym = None
            elif cp in SPACES:
                prev_cjk = prev_sym = None
            else:
                s = ch.encode("utf-8")
                out.append(b"s" + s)
                if prev_sym is not None:
                    out.append(b"t" + prev_sym + s)
                prev_sym = s
                prev_cjk = None
        if word:
            flush()
    out.append(b"len%d" % bucket_of(len(text.encode("utf-8")), [16, 64, 256, 1024, 4096]))
    out.append(b"nl%d" % bucket_of(newlines, [1, 3, 10]))
    if fence:
        out.append(b"fence")
    if indent:
        out.append(b"indent")
    if cjk:
        out.append(b"cjk")
    if last in (0x3F, 0xFF1F):
        out.append(b"q")
    return out


def vector(text, bits=BUCKET_BITS):
    """(bucket → count, number of features)."""
    mask = (1 << bits) - 1
    counts = {}
    feats = features(text)
    for f in feats:
        j = fnv1a(f) & mask
        counts[j] = counts.get(j, 0) + 1
    return counts, len(feats)


# ---- models -------------------------------------------------------------


def train_lr(rows, buckets, epochs=EPOCHS, eta0=ETA0, l2=L2, seed=SEED):
    """Multinomial logistic regression by SGD. rows: [(counts, n, y)].
    Returns (weights[bucket][label], biases[label]) as floats."""
    k = len(LABELS)
    w = [[0.0] * k for _ in range(buckets)]
    b = [0.0] * k
    scale = 1.0  # w_true = scale * w (lazy L2 decay)
    rng = random.Random(seed)
    order = list(range(len(rows)))
    for _ in range(epochs):
        rng.shuffle(order)
        for i in order:
            counts, n, y = rows[i]
            inv = 1.0 / math.sqrt(n)
            xs = [(j, c * inv) for j, c in counts.items()]
            z = list(b)
            for j, x in xs:
                row = w[j]
                for l in range(k):
                    z[l] += scale * row[l] * x
            m = max(z)
            e = [math.exp(v - m) for v in z]
            s = sum(e)
            g = [v / s for v in e]
            g[y] -= 1.0
            eta = eta0
            scale *= 1.0 - eta * l2
            if scale < 1e-6:
                for row in w:
                    for l in range(k):
                        row[l] *= scale
                scale = 1.0
            for l in range(k):
                b[l] -= eta * g[l]
            step = eta / scale
            for j, x in xs:
                row = w[j]
                for l in range(k):
                    row[l] -= step * g[l] * x
    return [[v * scale for v in row] for row in w], b


def train_cnb(rows, buckets, alpha=0.3):
    """Complement naive Bayes (Rennie et al. 2003, weight-normalized).
    Returns (weights, biases) in the same linear form as train_lr."""
    k = len(LABELS)
    per = [[0.0] * buckets for _ in range(k)]
    for counts, n, y in rows:
        inv = 1.0 / math.sqrt(n)
        for j, c in counts.items():
            per[y][j] += c * inv
    total = [sum(per[l][j] for l in range(k)) for j in range(buckets)]
    w = [[0.0] * k for _ in range(buckets)]
    for l in range(k):
        comp = [total[j] - per[l][j] + alpha for j in range(buckets)]
        s = sum(comp)
        logs = [math.log(c / s) for c in comp]
        norm_ = sum(abs(v) for v in logs)
        for j in range(buckets):
            w[j][l] = -logs[j] / norm_ * buckets
    return w, [0.0] * k


def quantize(w, b):
    """i8 weights with one scale, biases as i32 in the same unit."""
    top = max(abs(v) for row in w for v in row) or 1.0
    scale = top / 127.0
    wq = [[max(-127, min(127, round(v / scale))) for v in row] for row in w]
    bq = [round(v / scale) for v in b]
    return wq, bq, scale


def predict(model, counts, n):
    """The label index the model gives: integer sums, then f64 as in Rust."""
    w, b = model
    k = len(LABELS)
    sums = [0] * k
    for j, c in counts.items():
        row = w[j]
        for l in range(k):
            sums[l] += row[l] * c
    root = math.sqrt(n)
    best, best_score = 0, None
    for l in range(k):
        score = float(b[l]) + float(sums[l]) / root
        if best_score is None or score > best_score:
            best, best_score = l, score
    return best


def predict_float(model, counts, n):
    w, b = model
    k = len(LABELS)
    inv = 1.0 / math.sqrt(n)
    z = list(b)
    for j, c in counts.items():
        for l in range(k):
            z[l] += w[j][l] * c * inv
    return max(range(k), key=lambda l: (z[l], -l))


# ---- scoring ------------------------------------------------------------


def f1_table(gold, pred):
    """{label: (precision, recall, f1, support)} and the macro-F1."""
    table = {}
    for l in range(len(LABELS)):
        tp = sum(1 for g, p in zip(gold, pred) if g == l and p == l)
        fp = sum(1 for g, p in zip(gold, pred) if g != l and p == l)
        fn = sum(1 for g, p in zip(gold, pred) if g == l and p != l)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        table[LABELS[l]] = (prec, rec, f1, tp + fn)
    present = [v[2] for v in table.values() if v[3]]
    return table, sum(present) / len(present)


def report(name, rows, preds):
    gold = [r["y"] for r in rows]
    _, macro = f1_table(gold, preds)
    acc = sum(1 for g, p in zip(gold, preds) if g == p) / len(rows)
    parts = [f"{name}: {len(rows)} prompts, macro-F1 {macro:.3f}, accuracy {acc:.3f}"]
    for lang in ("en", "zh"):
        idx = [i for i, r in enumerate(rows) if r["lang"] == lang]
        _, m = f1_table([gold[i] for i in idx], [preds[i] for i in idx])
        parts.append(f"{lang} {m:.3f}")
    print("; ".join(parts))
    table, _ = f1_table(gold, preds)
    for label, (p, r, f, s) in table.items():
        print(f"    {label:<12} precision {p:.3f} recall {r:.3f} F1 {f:.3f} ({s})")
    return macro


def load():
    rows = []
    with open(DATA, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            r["y"] = LABELS.index(r["label"])
            rows.append(r)
    return rows


def folds(rows, k=5, seed=SEED):
    """k stratified folds (label × language) of row indices."""
    rng = random.Random(seed)
    cells = {}
    for i, r in enumerate(rows):
        cells.setdefault((r["label"], r["lang"]), []).append(i)
    out = [[] for _ in range(k)]
    for key in sorted(cells):
        idx = cells[key]
        rng.shuffle(idx)
        for n, i in enumerate(idx):
            out[n % k].append(i)
    return out


def compare(train, test):
    """Cross-validates each candidate on the train lines, then trains it on
    them all and scores it on the held-out lines."""
    buckets = 1 << BUCKET_BITS
    vecs = [vector(r["text"]) for r in train]
    test_vecs = [vector(r["text"]) for r in test]
    gold = [r["y"] for r in train]
    candidates = [("lr", dict(epochs=EPOCHS, eta0=ETA0, l2=l2)) for l2 in (1e-4, 1e-5, 1e-6, 0.0)]
    candidates += [("cnb", dict(alpha=a)) for a in (0.1, 0.3, 1.0)]
    for kind, params in candidates:
        preds = [None] * len(train)
        for fold in folds(train):
            held = set(fold)
            rows = [(vecs[i][0], vecs[i][1], gold[i]) for i in range(len(train)) if i not in held]
            fn = train_lr if kind == "lr" else train_cnb
            w, b = fn(rows, buckets, **params)
            wq, bq, _ = quantize(w, b)
            for i in fold:
                preds[i] = predict((wq, bq), *vecs[i])
        _, macro = f1_table(gold, preds)
        w, b = fn([(c, n, y) for (c, n), y in zip(vecs, gold)], buckets, **params)
        wq, bq, _ = quantize(w, b)
        _, held = f1_table([r["y"] for r in test], [predict((wq, bq), c, n) for c, n in test_vecs])
        print(f"{kind} {params}: 5-fold CV macro-F1 {macro:.3f}, held-out {held:.3f}", flush=True)


def main():
    rows = load()
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    if "--compare" in sys.argv:
        compare(train, test)
        return
    buckets = 1 << BUCKET_BITS
    tv = [vector(r["text"]) for r in train]
    w, b = train_lr([(c, n, r["y"]) for (c, n), r in zip(tv, train)], buckets)
    wq, bq, scale = quantize(w, b)
    model = (wq, bq)

    blob = bytearray(b"SYSC")
    blob += struct.pack("<HHIIf", 1, len(LABELS), buckets, WINDOW, scale)
    for label in LABELS:
        blob += struct.pack("<B", len(label)) + label.encode("ascii")
    blob += struct.pack("<%di" % len(LABELS), *bq)
    blob += struct.pack("<%db" % (buckets * len(LABELS)), *(v for row in wq for v in row))
    with open(MODEL, "wb") as f:
        f.write(blob)

    train_pred = [predict(model, c, n) for c, n in tv]
    test_vecs = [vector(r["text"]) for r in test]
    test_pred = [predict(model, c, n) for c, n in test_vecs]
    float_pred = [predict_float((w, b), c, n) for c, n in test_vecs]
    with open(PREDICTIONS, "w", encoding="utf-8") as f:
        for p in test_pred:
            f.write(LABELS[p] + "\n")

    print(f"model.bin: {len(blob)} bytes ({buckets} buckets × {len(LABELS)} labels, i8, scale {scale:.6g})")
    report("train", train, train_pred)
    report("held-out", test, test_pred)
    _, fm = f1_table([r["y"] for r in test], float_pred)
    print(f"held-out macro-F1 before quantization: {fm:.3f}")
    wrong = [(r, p) for r, p in zip(test, test_pred) if p != r["y"]]
    if "-v" in sys.argv:
        for r, p in wrong:
            print(f"  {r['label']} -> {LABELS[p]} [{r['lang']}]: {r['text'][:90]!r}")


if __name__ == "__main__":
    main()
