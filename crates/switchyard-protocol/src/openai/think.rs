//! An answer's inline `<think>…</think>` prefix (MiniMax's default, some
//! open models on vLLM) split off its text as reasoning (MAPPING §18.6),
//! whole or as the stream's text arrives in pieces cut anywhere.

use crate::ir::StreamEvent;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// A whole answer's text → (reasoning, text). Text that does not start
/// with `<think>` (after leading whitespace) is all text.
pub fn split_whole(text: &str) -> (Option<String>, String) {
    let mut s = ThinkSplit::default();
    let mut out = Vec::new();
    s.push(text, &mut out);
    s.finish(&mut out);
    let (mut reasoning, mut answer) = (None::<String>, String::new());
    for ev in out {
        match ev {
            StreamEvent::ReasoningDelta { text, .. } => {
                reasoning.get_or_insert_with(String::new).push_str(&text)
            }
            StreamEvent::TextDelta(t) => answer.push_str(&t),
            _ => {}
        }
    }
    (reasoning, answer)
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum State {
    /// Nothing decided yet: the text so far may still open `<think>`.
    #[default]
    Start,
    /// Just past `<think>`: whitespace before the reasoning is dropped.
    Opened,
    Inside,
    /// Past `</think>`: whitespace before the answer is dropped.
    Closed,
    Text,
}

/// The stream's splitter: [`ThinkSplit::push`] each text piece, then
/// [`ThinkSplit::finish`].
#[derive(Debug, Default)]
pub struct ThinkSplit {
    state: State,
    /// Text held back: a possible start of `<think>` or `</think>`.
    held: String,
}

impl ThinkSplit {
    pub fn push(&mut self, piece: &str, out: &mut Vec<StreamEvent>) {
        self.held.push_str(piece);
        loop {
            match self.state {
                State::Start => {
                    let t = self.held.trim_start();
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        self.held = rest.to_owned();
                        self.state = State::Opened;
                    } else if OPEN.starts_with(t) {
                        return; // still maybe `<think>`
                    } else {
                        self.state = State::Text;
                    }
                }
                State::Opened => {
                    let t = self.held.trim_start();
                    if t.is_empty() {
                        self.held.clear();
                        return;
                    }
                    self.held = t.to_owned();
                    self.state = State::Inside;
                }
                State::Inside => {
                    if let Some(at) = self.held.find(CLOSE) {
                        let reasoning: String = self.held.drain(..at + CLOSE.len()).collect();
                        reason(reasoning[..at].trim_end(), out);
                        self.state = State::Closed;
                        continue;
                    }
                    // All but a tail that may begin `</think>` (and the
                    // whitespace before it, dropped at the close) is reasoning.
                    let keep = partial_tail(&self.held, CLOSE);
                    let body = &self.held[..self.held.len() - keep];
                    let upto = body.trim_end().len();
                    let reasoning: String = self.held.drain(..upto).collect();
                    reason(&reasoning, out);
                    return;
                }
                State::Closed => {
                    let t = self.held.trim_start();
                    if t.is_empty() {
                        self.held.clear();
                        return;
                    }
                    self.held = t.to_owned();
                    self.state = State::Text;
                }
                State::Text => {
                    if !self.held.is_empty() {
                        out.push(StreamEvent::TextDelta(std::mem::take(&mut self.held)));
                    }
                    return;
                }
            }
        }
    }

    /// The end of the text: whatever was held back goes out as what it
    /// was (an unclosed `<think>` is reasoning; a lone `<thi` is text).
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Inside => reason(held.trim_end(), out),
            State::Opened | State::Closed => {}
            State::Start | State::Text => {
                if !held.is_empty() {
                    out.push(StreamEvent::TextDelta(held));
                }
            }
        }
    }
}

fn reason(text: &str, out: &mut Vec<StreamEvent>) {
    if !text.is_empty() {
        out.push(StreamEvent::ReasoningDelta {
            text: text.to_owned(),
            signature: None,
        });
    }
}

/// The length of the longest end of `s` that is a proper start of `tag`.
fn partial_tail(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(out: &[StreamEvent]) -> (String, String) {
        let (mut r, mut t) = (String::new(), String::new());
        for ev in out {
            match ev {
                StreamEvent::ReasoningDelta { text, .. } => r.push_str(text),
                StreamEvent::TextDelta(x) => t.push_str(x),
                _ => {}
            }
        }
        (r, t)
    }

    #[test]
    fn a_think_prefix_is_reasoning_at_every_split_point() {
        let whole = "<think>\nThe user wants a greeting.\n</think>\n\nHello there </think> <think>";
        for a in 0..=whole.len() {
            for b in a..=whole.len() {
                let mut s = ThinkSplit::default();
                let mut out = Vec::new();
                for piece in [&whole[..a], &whole[a..b], &whole[b..]] {
                    s.push(piece, &mut out);
                }
                s.finish(&mut out);
                assert_eq!(
                    joined(&out),
                    (
                        "The user wants a greeting.".to_owned(),
                        "Hello there </think> <think>".to_owned()
                    ),
                    "split at {a}, {b}"
                );
            }
        }
    }

    #[test]
    fn text_without_the_prefix_is_untouched() {
        for text in [
            "Hello",
            "<thinking> is a tag",
            "<th",
            " a <think> later",
            "",
        ] {
            let (r, t) = split_whole(text);
            assert_eq!((r, t.as_str()), (None, text), "{text:?}");
        }
    }

    #[test]
    fn an_unclosed_think_is_all_reasoning() {
        assert_eq!(
            split_whole("<think>cut off mid-tho"),
            (Some("cut off mid-tho".to_owned()), String::new())
        );
    }
}
