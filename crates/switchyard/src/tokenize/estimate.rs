//! The hot-path token estimate: what context-window fit, tpm and budget
//! reservations are decided on, before any upstream has counted.
//!
//! A BPE tokenizer first splits text into pieces with a regular expression
//! (a word with the space or mark before it, up to three digits, a run of
//! punctuation, a run of whitespace) and then merges bytes within each
//! piece; a common piece is one token. This estimate walks the bytes once,
//! splits them the way `o200k_base`'s expression does, and prices each piece
//! instead of encoding it: one token, plus a share for a long word or a long
//! run of punctuation; CJK text, which has no spaces to split on, by the
//! character. No vocabulary, no allocation.
//!
//! [`json`] reads JSON text (tool definitions, schemas) as a provider
//! renders it: whitespace between tokens is left out, escapes count as the
//! character they stand for, and a long base64 string (an inline image or
//! file) counts as one [`BINARY_TOKENS`] item, not as text.
//!
//! Accuracy and cost: see `tokenize`'s module doc (measured against the
//! provider fixtures' real usage and `o200k_base`).

/// What one inline binary (an image, a file part) is reserved at, whatever
/// its size: the largest default-setting figure among the providers' own
/// image rules — Anthropic scales an image down to ~1.15 megapixels and
/// bills ~w×h/750 tokens, ~1 600 at most; OpenAI's high detail is at most
/// 85 + 8 tiles × 170 = 1 445 (gpt-4o); Gemini bills 258 a 768-pixel tile.
/// A small image is billed less: the reservation errs on the safe side.
pub const BINARY_TOKENS: u64 = 1600;

/// Thousandths of a token.
const ONE: u64 = 1000;
/// What each kind of piece is priced at, in thousandths of a token
/// (fitted to `o200k_base` on the fixtures' text, see `tokenize`).
#[derive(Debug, Clone, Copy)]
struct Weights {
    /// A word piece of up to this many characters is usually one token.
    word_free: u64,
    /// Each character of a word piece beyond `word_free`.
    word_extra: u64,
    /// A non-ASCII letter inside a word (accents, Cyrillic, Greek, …):
    /// merges are rarer there.
    non_ascii_letter: u64,
    /// Each punctuation character of a run beyond its first.
    punct_extra: u64,
    /// A Han or kana character.
    cjk: u64,
    /// A Hangul syllable (Korean puts spaces between words).
    hangul: u64,
    /// CJK punctuation (`、。「」，`): often merged with a neighbour.
    cjk_punct: u64,
    /// A non-ASCII symbol (emoji, typographic quotes, arrows).
    symbol: u64,
}

const WEIGHTS: Weights = Weights {
    word_free: 5,
    word_extra: 200,
    non_ascii_letter: 300,
    punct_extra: 0,
    cjk: 800,
    hangul: 600,
    cjk_punct: 100,
    symbol: 1200,
};

/// A JSON string at least this long, with no space, of the base64 alphabet
/// only (or a `data:` URL), is an inline binary.
const BINARY_MIN: usize = 256;

/// The estimated tokens of plain text.
pub fn text(s: &str) -> u64 {
    round(Scan::new(s.as_bytes(), false, &WEIGHTS).run())
}

/// The estimated tokens of JSON text, as a provider renders it (see the
/// module doc).
pub fn json(s: &str) -> u64 {
    round(Scan::new(s.as_bytes(), true, &WEIGHTS).run())
}

fn round(milli: u64) -> u64 {
    milli.div_ceil(ONE)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Lower,
    Upper,
    Digit,
    Space,
    Newline,
    Punct,
    /// A byte of a multi-byte character.
    Wide,
}

const fn class_table() -> [Class; 256] {
    let mut t = [Class::Wide; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        t[i] = if b.is_ascii_lowercase() {
            Class::Lower
        } else if b.is_ascii_uppercase() {
            Class::Upper
        } else if b.is_ascii_digit() {
            Class::Digit
        } else if b == b'\n' || b == b'\r' {
            Class::Newline
        } else if b == b' ' || b == b'\t' || b == 0x0b || b == 0x0c {
            Class::Space
        } else {
            Class::Punct
        };
        i += 1;
    }
    t
}

static CLASS: [Class; 256] = class_table();

/// What a multi-byte character is, for the estimate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wide {
    Cjk,
    Hangul,
    CjkPunct,
    Letter,
    Symbol,
}

fn wide(c: char) -> Wide {
    let u = c as u32;
    let cjk = matches!(u,
        0x3040..=0x30FF      // kana
        | 0x3400..=0x4DBF    // Han extension A
        | 0x4E00..=0x9FFF    // Han
        | 0xF900..=0xFAFF    // Han compatibility
        | 0x20000..=0x2FFFF  // Han extensions B–F
    );
    if cjk {
        Wide::Cjk
    } else if (0xAC00..=0xD7AF).contains(&u) {
        Wide::Hangul
    } else if matches!(u, 0x3000..=0x303F | 0xFF00..=0xFF65) {
        Wide::CjkPunct
    } else if c.is_alphabetic() {
        Wide::Letter
    } else {
        Wide::Symbol
    }
}

struct Scan<'a> {
    b: &'a [u8],
    w: &'a Weights,
    /// JSON text: whitespace is structure (a JSON string holds no raw
    /// newline, and a space inside one mostly joins the next word anyway).
    json: bool,
}

/// The character at the start of `b` (a multi-byte one), and its length.
fn decode(b: &[u8]) -> (char, usize) {
    let len = match b[0] {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        // A stray continuation byte (never at a `&str`'s char boundary).
        _ => 1,
    }
    .min(b.len());
    let ch = std::str::from_utf8(&b[..len])
        .ok()
        .and_then(|s| s.chars().next())
        .unwrap_or('\u{fffd}');
    (ch, len)
}

fn is_letter_at(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        Some(&x) => match CLASS[x as usize] {
            Class::Lower | Class::Upper => true,
            Class::Wide => wide(decode(&b[i..]).0) == Wide::Letter,
            _ => false,
        },
        None => false,
    }
}

impl<'a> Scan<'a> {
    fn new(b: &'a [u8], json: bool, w: &'a Weights) -> Self {
        Scan { b, w, json }
    }

    /// Total, in thousandths of a token: one pass, piece by piece.
    fn run(self) -> u64 {
        let (b, w) = (self.b, self.w);
        let mut milli = 0;
        let mut i = 0;
        while i < b.len() {
            let x = b[i];
            let (cost, next) = match CLASS[x as usize] {
                Class::Lower | Class::Upper => self.word(i),
                Class::Digit => {
                    let j = run(b, i, |c| c == Class::Digit);
                    (((j - i) as u64).div_ceil(3) * ONE, j)
                }
                Class::Space | Class::Newline if self.json => (0, i + 1),
                Class::Space => self.spaces(i),
                Class::Newline => (ONE, run(b, i, |c| c == Class::Newline)),
                Class::Punct => self.punct(i),
                Class::Wide => {
                    let (ch, len) = decode(&b[i..]);
                    match wide(ch) {
                        Wide::Letter => self.word(i),
                        Wide::Cjk => (w.cjk, i + len),
                        Wide::Hangul => (w.hangul, i + len),
                        Wide::CjkPunct => (w.cjk_punct, i + len),
                        Wide::Symbol => (w.symbol, i + len),
                    }
                }
            };
            milli += cost;
            i = next;
        }
        milli
    }

    /// A word piece from `i`: capitals then lower case (`camelCase` is two
    /// pieces, `HTMLParser` one). Its cost and where it ends.
    fn word(&self, i: usize) -> (u64, usize) {
        let b = self.b;
        // Capitals first, then lower case (and letters outside ASCII).
        let mut j = i;
        while j < b.len() && b[j].is_ascii_uppercase() {
            j += 1;
        }
        let (mut wide_letters, mut wide_bytes) = (0u64, 0usize);
        loop {
            while j < b.len() && b[j].is_ascii_lowercase() {
                j += 1;
            }
            if j >= b.len() || b[j] < 0x80 {
                break;
            }
            let (ch, len) = decode(&b[j..]);
            if wide(ch) != Wide::Letter {
                break;
            }
            wide_letters += 1;
            wide_bytes += len;
            j += len;
        }
        if j == i {
            // A lone non-ASCII letter that is not one (cannot happen).
            return (ONE, i + 1);
        }
        let chars = (j - i - wide_bytes) as u64 + wide_letters;
        let w = self.w;
        let cost = ONE
            + chars.saturating_sub(w.word_free) * w.word_extra
            + wide_letters * w.non_ascii_letter;
        (cost, j)
    }

    /// Spaces before a word or punctuation join it (the last one); before a
    /// newline they join the newline; otherwise they are a piece.
    fn spaces(&self, i: usize) -> (u64, usize) {
        let j = run(self.b, i, |c| c == Class::Space);
        let cost = match self.b.get(j).map(|&x| CLASS[x as usize]) {
            Some(Class::Newline) => 0,
            Some(Class::Digit) | None => ONE,
            Some(_) if j - i == 1 => 0,
            Some(_) => ONE,
        };
        (cost, j)
    }

    /// A run of punctuation (and the newlines right after it); one mark
    /// right before a word joins the word. In JSON, whitespace inside the
    /// run is structure, and a string the run opens may be an inline binary.
    fn punct(&self, i: usize) -> (u64, usize) {
        let b = self.b;
        let j = if self.json {
            run(b, i, |c| {
                matches!(c, Class::Punct | Class::Space | Class::Newline)
            })
        } else {
            run(b, i, |c| c == Class::Punct)
        };
        if self.json && b[j - 1] == b'"' {
            if let Some(end) = self.binary(j - 1) {
                return (ONE + BINARY_TOKENS * ONE, end);
            }
        }
        if j - i == 1 && is_letter_at(b, j) {
            return (0, j);
        }
        let end = if self.json {
            j
        } else {
            run(b, j, |c| c == Class::Newline)
        };
        (ONE + (j - i - 1) as u64 * self.w.punct_extra, end)
    }

    /// At a JSON string's opening quote: where the string ends, if it is an
    /// inline binary (long, one base64 word, or a `data:` URL).
    fn binary(&self, i: usize) -> Option<usize> {
        let body = &self.b[i + 1..];
        let base64 =
            |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'-' | b'_');
        let head = &body[..body.len().min(16)];
        if !(body.starts_with(b"data:") || head.len() == 16 && head.iter().all(base64)) {
            return None;
        }
        let end = body.iter().position(|&c| c == b'"' || c == b'\\')?;
        let s = &body[..end];
        let binary = body[end] == b'"'
            && end >= BINARY_MIN
            && (s.starts_with(b"data:") || s.iter().all(base64));
        binary.then_some(i + end + 2)
    }
}

/// Where the run of bytes of a class `f` accepts, from `i`, ends.
fn run(b: &[u8], i: usize, f: impl Fn(Class) -> bool) -> usize {
    let mut j = i;
    while j < b.len() && f(CLASS[b[j] as usize]) {
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_as_o200k_splits_them() {
        assert_eq!(text(""), 0);
        assert_eq!(text("hello world"), 2);
        assert_eq!(text("camelCase"), 2);
        assert_eq!(text("1234567"), 3);
        // JSON whitespace outside strings is not text.
        assert_eq!(json("{\"a\": 1}"), json("{\"a\":1}"));
        assert_eq!(json("{\n  \"a\" : 1\n}"), json("{\"a\":1}"));
    }

    #[test]
    fn a_base64_string_in_json_is_one_binary() {
        let data = "A".repeat(100_000);
        let j = format!(r#"{{"type":"image","source":{{"data":"{data}"}}}}"#);
        let n = json(&j);
        assert!(n > BINARY_TOKENS && n < BINARY_TOKENS + 20, "{n}");
        // As plain text it is text.
        assert!(text(&data) > 10_000);
    }
}
