//! `${VAR}` / `${VAR:-default}` expansion in scalar values; `$${` is a literal `${`.
//!
//! Expansion runs on parsed string scalars (never on keys or the raw text), so
//! YAML quoting cannot be broken by a variable's value. An error is placed at
//! its `${` in the source by finding the same-numbered `${` in the scalar's
//! source text (exact for every quoting style; the scalar's start otherwise).

use super::node::{At, Kind, Node, Pos, Value};
use super::Diags;

pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A failed placeholder: which `${` (0-based, escapes not counted) and why.
#[derive(Debug, PartialEq)]
pub struct ExpandError {
    pub nth: usize,
    pub message: String,
}

/// Expands every placeholder in `s`, collecting every failure.
pub fn expand(s: &str, env: Env) -> Result<String, Vec<ExpandError>> {
    let mut out = String::with_capacity(s.len());
    let mut errors = Vec::new();
    let mut rest = s;
    let mut nth = 0;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        if !tail.starts_with("${") {
            out.push('$');
            rest = &tail[1..];
            continue;
        }
        let Some(end) = tail.find('}') else {
            errors.push(ExpandError {
                nth,
                message: "unclosed `${`; write `$${` for a literal `${`".into(),
            });
            out.push_str(tail);
            break;
        };
        let inner = &tail[2..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            let message = format!(
                "invalid placeholder `${{{inner}}}`: expected `${{NAME}}` or `${{NAME:-default}}`"
            );
            errors.push(ExpandError { nth, message });
        } else {
            // Like the shell's `:-`, an empty variable also takes the default.
            match (
                env(name).filter(|v| !v.is_empty() || default.is_none()),
                default,
            ) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => {
                    let message = format!("environment variable `{name}` is not set (use `${{{name}:-default}}` for a fallback)");
                    errors.push(ExpandError { nth, message });
                }
            }
        }
        nth += 1;
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Expands all string scalar values in the tree, reporting failures at their `${`.
pub fn expand_tree(node: &mut Node, at: &At, src: &str, env: Env, d: &mut Diags) {
    let here = At {
        pos: node.pos,
        path: at.path.clone(),
    };
    match &mut node.value {
        Value::Scalar(Kind::Str, text) if text.contains('$') => match expand(text, env) {
            Ok(v) => {
                node.from_env = text.replace("$${", "").contains("${");
                *text = v;
            }
            Err(errors) => {
                node.value = Value::Scalar(Kind::Invalid, String::new());
                for e in errors {
                    let pos = node
                        .span
                        .clone()
                        .and_then(|r| placeholder_pos(src, r, e.nth))
                        .unwrap_or(here.pos);
                    d.err(
                        &At {
                            pos,
                            path: here.path.clone(),
                        },
                        e.message,
                    );
                }
            }
        },
        Value::Scalar(..) => {}
        Value::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let item_at = here.index(item.pos, i);
                expand_tree(item, &item_at, src, env, d);
            }
        }
        Value::Map(entries) => {
            for (k, v) in entries.iter_mut() {
                let child = here.child(v.pos, k.text().unwrap_or("?"));
                expand_tree(v, &child, src, env, d);
            }
        }
    }
}

/// Line and column of the `nth` unescaped `${` inside `src[range]`.
fn placeholder_pos(src: &str, range: std::ops::Range<usize>, nth: usize) -> Option<Pos> {
    let slice = src.get(range.clone())?;
    let mut seen = 0;
    let mut i = 0;
    while let Some(j) = slice[i..].find("${") {
        let at = i + j;
        if at > 0 && slice.as_bytes()[at - 1] == b'$' {
            i = at + 2;
            continue;
        }
        if seen == nth {
            return Some(pos_of(src, range.start + at));
        }
        seen += 1;
        i = at + 2;
    }
    None
}

/// 1-based line and character column of a byte offset.
pub fn pos_of(src: &str, offset: usize) -> Pos {
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Pos {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("example.com".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_vars_and_defaults() {
        assert_eq!(
            expand("https://${HOST}/v1", &env).unwrap(),
            "https://example.com/v1"
        );
        assert_eq!(expand("${NOPE:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand("${NOPE:-}", &env).unwrap(), "");
        assert_eq!(expand("${EMPTY:-x}", &env).unwrap(), "x");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand("${HOST:-x}", &env).unwrap(), "example.com");
        assert_eq!(expand("a $5 b $", &env).unwrap(), "a $5 b $");
        assert_eq!(
            expand("$${HOST} ${HOST}", &env).unwrap(),
            "${HOST} example.com"
        );
        assert_eq!(expand("${NOPE:-a:-b}", &env).unwrap(), "a:-b");
    }

    #[test]
    fn reports_each_bad_placeholder() {
        let errs = expand("${A} $${B} ${HOST} ${C}", &env).unwrap_err();
        assert_eq!(errs.iter().map(|e| e.nth).collect::<Vec<_>>(), [0, 2]);
        assert!(
            errs[0].message.contains("`A` is not set"),
            "{}",
            errs[0].message
        );
        let errs = expand("x ${1BAD} ${", &env).unwrap_err();
        assert!(errs[0].message.contains("invalid placeholder `${1BAD}`"));
        assert!(errs[1].message.contains("unclosed"));
        assert_eq!(errs[1].nth, 1);
    }

    #[test]
    fn positions_in_source() {
        let src = "a: \"x $${Y} ${Z}\"\nb: |\n  one\n  two ${W}\n";
        assert_eq!(
            placeholder_pos(src, 3..17, 0),
            Some(Pos {
                line: 1,
                column: 13
            })
        );
        assert_eq!(
            placeholder_pos(src, 21..src.len(), 0),
            Some(Pos { line: 4, column: 7 })
        );
        assert_eq!(placeholder_pos(src, 3..17, 1), None);
    }
}
