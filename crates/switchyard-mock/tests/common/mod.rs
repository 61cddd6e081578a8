//! Raw HTTP/1.1 client and JSON shape helpers for the mock's tests.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");

pub fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIX}{path}")).unwrap()
}

pub fn fixture_json(path: &str) -> Value {
    serde_json::from_str(&fixture(path)).unwrap()
}

#[derive(Debug)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
    }
}

/// One HTTP/1.1 exchange over a raw TCP connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    pub head: Option<Head>,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Data chunks as received (chunked responses).
    pub chunks: Vec<Vec<u8>>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

impl Conn {
    pub async fn send(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<Conn> {
        let mut stream = TcpStream::connect(addr).await?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).await?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            head: None,
        })
    }

    async fn fill(&mut self) -> Result<(), String> {
        let mut tmp = [0u8; 8192];
        let n = self
            .stream
            .read(&mut tmp)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("eof".into());
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(())
    }

    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    async fn exact(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            self.fill().await?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Read the status line and headers. Err("eof") if the connection closes first.
    pub async fn read_head(&mut self) -> Result<&Head, String> {
        let status_line = self.line().await?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or(format!("bad status line {status_line:?}"))?;
        let mut headers = Vec::new();
        loop {
            let l = self.line().await?;
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        self.head = Some(Head { status, headers });
        Ok(self.head.as_ref().unwrap())
    }

    /// Next chunk of a chunked body: Ok(None) at the terminating chunk, Err if the
    /// connection ends first.
    pub async fn read_chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        let size_line = self.line().await?;
        let size = usize::from_str_radix(size_line.trim(), 16).map_err(|e| e.to_string())?;
        if size == 0 {
            self.line().await?;
            return Ok(None);
        }
        let data = self.exact(size).await?;
        self.exact(2).await?;
        Ok(Some(data))
    }

    /// Read the whole response. Err(msg) if the connection ends early (msg = what was read).
    pub async fn read_all(mut self) -> Result<Resp, (String, Vec<u8>)> {
        if self.head.is_none() {
            self.read_head().await.map_err(|e| (e, Vec::new()))?;
        }
        let head = self.head.take().unwrap();
        let mut body = Vec::new();
        let mut chunks = Vec::new();
        if head.chunked() {
            loop {
                match self.read_chunk().await {
                    Ok(Some(c)) => {
                        body.extend_from_slice(&c);
                        chunks.push(c);
                    }
                    Ok(None) => break,
                    Err(e) => return Err((e, body)),
                }
            }
        } else {
            let len: usize = head
                .header("content-length")
                .map(|l| l.parse().unwrap())
                .unwrap_or(0);
            body = self.exact(len).await.map_err(|e| (e, Vec::new()))?;
        }
        Ok(Resp {
            status: head.status,
            headers: head.headers,
            body,
            chunks,
        })
    }
}

/// Send a request and read the whole response (panics on a broken response).
pub async fn call(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &Value) -> Resp {
    let conn = Conn::send(addr, "POST", path, headers, &body.to_string())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), conn.read_all())
        .await
        .expect("response in time")
        .expect("complete response")
}

/// Ordered, de-duplicated key paths of a JSON value (values ignored; arrays as `[]`).
pub fn key_paths(v: &Value) -> Vec<String> {
    fn walk(v: &Value, prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let p = format!("{prefix}.{k}");
                    if !out.contains(&p) {
                        out.push(p.clone());
                    }
                    walk(child, &p, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, &format!("{prefix}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

/// JSON payloads of an SSE body (`data:` lines; `[DONE]` and unparsable data skipped).
pub fn sse_json(body: &str) -> Vec<Value> {
    sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// Raw `data:` payloads of an SSE body, in order.
pub fn sse_data(body: &str) -> Vec<String> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|ev| {
            ev.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string)
        })
        .collect()
}

/// Distinct key-path shapes of a list of events, in order of first appearance.
pub fn shapes(events: &[Value]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for e in events {
        let k = key_paths(e);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

// === request bodies shared by the answer and wire tests ===

pub const GEM: &str = "/v1beta/models/gemini-2.0-flash:generateContent";
pub const GEM_STREAM: &str = "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse";

pub fn openai_req(stream: bool) -> Value {
    json!({"model": "gpt-4o", "stream": stream, "stream_options": {"include_usage": true},
        "messages": [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "Hello"}]})
}

pub fn anthropic_req(stream: bool) -> Value {
    json!({"model": "claude-haiku-4-5", "max_tokens": 100, "stream": stream,
        "system": "You are a helpful assistant.", "messages": [{"role": "user", "content": "Hello"}]})
}

pub fn gemini_req() -> Value {
    json!({"systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}]})
}

// === Responses API, embeddings ===

/// `(event name, data JSON)` of each `event: X\ndata: {…}\n\n` frame.
pub fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|ev| !ev.is_empty())
        .map(|ev| {
            let name = ev
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_else(|| panic!("no event line in {ev:?}"));
            let data = ev
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("no data line in {ev:?}"));
            (name.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// A Responses event with its top-level keys in the 2026 order: `type`, then alphabetical
/// (the 2025 captures put `sequence_number` second).
pub fn order_2026(v: &Value) -> Value {
    let m = v.as_object().unwrap();
    let mut keys: Vec<&String> = m.keys().filter(|k| *k != "type").collect();
    keys.sort();
    let mut out = serde_json::Map::new();
    out.insert("type".into(), m["type"].clone());
    for k in keys {
        out.insert(k.clone(), m[k].clone());
    }
    Value::Object(out)
}

/// Key paths, sorted (for fixtures whose recorder sorted the keys).
pub fn sorted_paths(v: &Value) -> Vec<String> {
    let mut p = key_paths(v);
    p.sort();
    p
}

/// Decode standard base64.
pub fn b64decode(s: &str) -> Vec<u8> {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ABC.iter().position(|a| *a == c).expect("base64 char") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Little-endian f32s of a base64 embedding.
pub fn b64_floats(s: &str) -> Vec<f32> {
    b64decode(s)
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub const RESP: &str = "/v1/responses";

pub fn responses_req(stream: bool) -> Value {
    json!({"model": "gpt-4o-mini", "stream": stream, "instructions": "You are a helpful assistant.",
        "input": [{"role": "user", "content": "Hello"}]})
}
