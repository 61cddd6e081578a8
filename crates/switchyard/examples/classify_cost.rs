//! What the scene classifier (`switchyard::classify`, contract §11) costs a
//! request. Prints one JSON line per prompt kind: its size, the scene it
//! gets, and nanoseconds per `classify` call.
//!
//! cargo run --release --example classify_cost -- [ROUNDS]
//!
//! The prompts: English prose, Chinese prose and a code paste of 2 KB each
//! (the issue's target: under 20 µs per 2 KB prompt), a short question, and
//! a 1 MB paste (read as its first and last KiB, so it costs about what
//! 2 KB does). Each is timed ROUNDS times (best of the rounds' means), after
//! one call that parses the compiled-in model.

use std::hint::black_box;

#[path = "support/best_of.rs"]
mod best_of;
use best_of::time;
use std::time::Instant;

use switchyard::classify::classify;

const ENGLISH: &str = "We need a plan for moving our notification delivery off the \
monolith. Today every email, SMS and push notification is sent synchronously from \
request handlers, through three vendor SDKs. During traffic peaks the vendor calls \
add 200 to 900 ms to checkout and sign-up requests, and an outage at any vendor \
becomes an outage of the request that triggered it. We have five backend engineers, \
one SRE and a product manager for two quarters. Please propose milestones, what \
ships behind flags, how we measure progress, and the risks that could push the date. ";

const CHINESE: &str = "需要你帮我出一个迁移方案。现状：一台自建的数据库主库，两台从库，\
三个系统在写：主站的单体应用、一个埋点采集服务、一个老的运营后台。读请求大部分走从库。\
我们订阅日志同步到数仓，好几个团队依赖这条链路。目标是迁到云上的托管数据库，应用尽量少改，\
同步链路迁移后要能继续用。业务方能接受的停机窗口最多三十分钟，只能在周日凌晨。请给我分阶段的计划、\
每个阶段测什么、切换当天的操作手册、回滚方案，以及主要风险和应对措施。";

const CODE: &str = "This compiles but the test hangs on the second request:\n\n```rust\n\
pub async fn get(self: &Arc<Self>) -> std::io::Result<Conn> {\n\
    let permit = self.permits.acquire().await.expect(\"closed\");\n\
    permit.forget();\n\
    if let Some(c) = self.idle.lock().await.pop() {\n\
        return Ok(c);\n\
    }\n\
    let stream = TcpStream::connect(&self.addr).await?;\n\
    Ok(Conn { id: self.next_id.fetch_add(1, Ordering::Relaxed), stream })\n\
}\n```\n";

/// `text` repeated to `bytes` (cut at a character boundary).
fn fill(text: &str, bytes: usize) -> String {
    let mut out = text.repeat(bytes / text.len() + 1);
    let mut end = bytes;
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

fn main() -> Result<(), String> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(Ok(7), |a| a.parse().map_err(|e| format!("ROUNDS: {e}")))?;
    let t = Instant::now();
    classify(""); // parses the model once
    let first_ns = t.elapsed().as_nanos();
    let prompts = [
        ("en_2k", fill(ENGLISH, 2048)),
        ("zh_2k", fill(CHINESE, 2048)),
        ("code_2k", fill(CODE, 2048)),
        ("short", "What's the capital of Australia?".to_owned()),
        ("en_1m", fill(ENGLISH, 1 << 20)),
    ];
    for (name, text) in &prompts {
        let ns = time(rounds, || {
            black_box(classify(black_box(text)));
        });
        println!(
            "{{\"prompt\":\"{name}\",\"bytes\":{},\"scene\":\"{}\",\"ns\":{ns:.0}}}",
            text.len(),
            classify(text)
        );
    }
    println!("{{\"first_call_ns\":{first_ns}}}");
    Ok(())
}
