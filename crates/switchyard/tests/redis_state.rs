//! Shared state on a real `redis-server` (`state::redis`): several
//! instances (separate connections) admitting in parallel never exceed a
//! limit, a request's windows are charged all together or not at all, the
//! window slides; circuit transitions reach every instance within a second,
//! in version order, and an instance started later catches up.

mod common;

use switchyard::state::lease::{Renewal, LEASE_TTL_MS};
use switchyard::state::redis::{Admission, CircuitView, RedisState, Span, Window};

const MINUTE: u64 = 60_000;

/// A one-minute sliding window: `cost` more within `limit`.
fn minute(key: &str, limit: u64, cost: u64) -> Window<'_> {
    Window {
        key,
        limit,
        cost,
        span: Span::Sliding(MINUTE),
        alone_ok: false,
    }
}

async fn instances(r: &common::redis::Redis, n: usize) -> Vec<RedisState> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(RedisState::connect(&r.url(), "t:").await.unwrap());
    }
    out
}

#[tokio::test]
async fn three_instances_in_parallel_admit_exactly_the_limit() {
    let r = common::redis::Redis::start();
    let fleet = instances(&r, 3).await;
    let now = 1_000 * MINUTE;
    let calls = (0..600).map(|i| {
        let s = fleet[i % 3].clone();
        async move {
            let w = [minute("client:a:rpm", 100, 1)];
            s.admit(&w, now).await.unwrap()
        }
    });
    let results = futures_util::future::join_all(calls).await;
    let admitted = results
        .iter()
        .filter(|a| matches!(a, Admission::Admitted(_)))
        .count();
    assert_eq!(admitted, 100);
    // Every admission saw a distinct count: no two decided on the same one.
    let mut seen: Vec<u64> = results
        .iter()
        .filter_map(|a| match a {
            Admission::Admitted(u) => Some(u[0]),
            Admission::Refused { .. } | Admission::Revoked => None,
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=100).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_request_is_charged_in_every_window_or_in_none() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let now = 5 * MINUTE;
    let both = |cost| {
        [
            minute("client:b:rpm", 10, 1),
            minute("client:b:tpm", 500, cost),
        ]
    };
    for _ in 0..5 {
        assert!(matches!(
            s.admit(&both(100), now).await.unwrap(),
            Admission::Admitted(_)
        ));
    }
    // The tpm window is full: refused, and the rpm window not charged.
    assert_eq!(
        s.admit(&both(100), now).await.unwrap(),
        Admission::Refused {
            index: 1,
            used: 500
        }
    );
    let rpm = [minute("client:b:rpm", 10, 0)];
    assert_eq!(
        s.admit(&rpm, now).await.unwrap(),
        Admission::Admitted(vec![5])
    );
}

#[tokio::test]
async fn the_window_slides() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let w = [minute("dep:x:rpm", 10, 1)];
    let t0 = 100 * MINUTE;
    for _ in 0..10 {
        assert!(matches!(
            s.admit(&w, t0).await.unwrap(),
            Admission::Admitted(_)
        ));
    }
    let at = |ms| s.admit(&w, t0 + ms);
    assert!(matches!(
        at(30_000).await.unwrap(),
        Admission::Refused { index: 0, used: 10 }
    ));
    // A minute on, the first bucket slid out.
    assert_eq!(at(MINUTE).await.unwrap(), Admission::Admitted(vec![1]));
}

#[tokio::test]
async fn circuit_transitions_reach_every_instance_in_order_and_late_ones_catch_up() {
    let r = common::redis::Redis::start();
    let a = RedisState::connect(&r.url(), "t:").await.unwrap();
    // A consumer blocks its own connection while it waits.
    let b = RedisState::connect(&r.url(), "t:").await.unwrap();
    let (held, mut pos) = b.circuit_catch_up().await.unwrap();
    assert!(held.is_empty());
    let mut view = CircuitView::default();

    let waiting = tokio::spawn({
        let (b, pos) = (b.clone(), pos.clone());
        async move { b.circuit_events(&pos, 5_000).await.unwrap() }
    });
    // The scenario: the consumer is already blocked when the event comes
    // (nothing to poll: its waiting shows nowhere).
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    assert_eq!(a.publish_circuit("oa/gpt", "open", 1_000).await.unwrap(), 1);
    let (events, next) = waiting.await.unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].state.as_str(), events[0].version), ("open", 1));
    assert!(view.apply(events[0].clone()));
    pos = next;

    assert_eq!(
        a.publish_circuit("oa/gpt", "closed", 2_000).await.unwrap(),
        2
    );
    let (events, _) = b.circuit_events(&pos, 1_000).await.unwrap();
    assert!(view.apply(events[0].clone()));
    assert_eq!(view.state("oa/gpt"), Some("closed"));
    // A stale or repeated event never flips it back.
    let mut stale = events[0].clone();
    stale.version = 1;
    stale.state = "open".into();
    assert!(!view.apply(stale));
    assert!(!view.apply(events[0].clone()));
    assert_eq!(view.state("oa/gpt"), Some("closed"));

    // An instance started afterwards catches up on the latest state.
    a.publish_circuit("an/claude", "open", 3_000).await.unwrap();
    let c = RedisState::connect(&r.url(), "t:").await.unwrap();
    let (held, from) = c.circuit_catch_up().await.unwrap();
    let mut late = CircuitView::default();
    held.into_iter().for_each(|e| {
        late.apply(e);
    });
    assert_eq!(late.state("oa/gpt"), Some("closed"));
    assert_eq!(late.state("an/claude"), Some("open"));
    // And reads on from there: nothing it already has, then what comes next.
    let (none, _) = c.circuit_events(&from, 100).await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    a.publish_circuit("an/claude", "half_open", 4_000)
        .await
        .unwrap();
    let (next, _) = c.circuit_events(&from, 1_000).await.unwrap();
    assert_eq!((next[0].state.as_str(), next[0].version), ("half_open", 2));
}

#[tokio::test]
async fn a_budget_counter_starts_at_its_seed_is_corrected_later_and_never_passes_its_limit() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let w = |cost| {
        [Window {
            key: "budget:c:0",
            limit: 1_000_000,
            cost,
            span: Span::Fixed {
                ttl_ms: MINUTE,
                seed: 400_000,
            },
            alone_ok: false,
        }]
    };
    assert_eq!(
        s.admit(&w(500_000), 0).await.unwrap(),
        Admission::Admitted(vec![900_000])
    );
    assert_eq!(
        s.admit(&w(200_000), 0).await.unwrap(),
        Admission::Refused {
            index: 0,
            used: 900_000
        }
    );
    // The request cost less than it held: the correction frees the rest.
    let fix = switchyard::state::redis::Adjust {
        key: "budget:c:0".into(),
        field: None,
        delta: -300_000,
    };
    s.adjust(&[fix]).await.unwrap();
    assert_eq!(
        s.admit(&w(200_000), 0).await.unwrap(),
        Admission::Admitted(vec![800_000])
    );
}

#[tokio::test]
async fn one_request_larger_than_a_tpm_limit_runs_only_alone() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let w = |cost| {
        [Window {
            key: "dep:t:tpm",
            limit: 1_000,
            cost,
            span: Span::Sliding(MINUTE),
            alone_ok: true,
        }]
    };
    assert_eq!(
        s.admit(&w(5_000), MINUTE).await.unwrap(),
        Admission::Admitted(vec![5_000])
    );
    assert!(matches!(
        s.admit(&w(10), MINUTE).await.unwrap(),
        Admission::Refused { index: 0, .. }
    ));
}

#[tokio::test]
async fn a_window_keeps_its_sum_as_buckets_slide_out_and_corrections_land() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let w = |cost| minute("dep:s:tpm", 1_000, cost);
    let used = |a: Admission| match a {
        Admission::Admitted(u) => u[0],
        other => panic!("{other:?}"),
    };
    let t0 = 500 * MINUTE;
    assert_eq!(used(s.admit(&[w(300)], t0).await.unwrap()), 300);
    assert_eq!(used(s.admit(&[w(400)], t0 + 30_000).await.unwrap()), 700);
    // The first request used 100 tokens, not 300: its bucket and the sum move.
    let fix = |field, delta| switchyard::state::redis::Adjust {
        key: "dep:s:tpm".into(),
        field: Some(field),
        delta,
    };
    s.adjust(&[fix(w(0).field(t0).unwrap(), -200)])
        .await
        .unwrap();
    assert_eq!(used(s.admit(&[w(0)], t0 + 31_000).await.unwrap()), 500);
    // A minute on, the first bucket slid out: only the second counts.
    assert_eq!(used(s.admit(&[w(0)], t0 + MINUTE + 1).await.unwrap()), 400);
    // A late correction to the bucket that slid out changes nothing.
    s.adjust(&[fix(w(0).field(t0).unwrap(), 900)])
        .await
        .unwrap();
    assert_eq!(used(s.admit(&[w(0)], t0 + MINUTE + 2).await.unwrap()), 400);
    // Long silence: everything slid out.
    assert_eq!(used(s.admit(&[w(1)], t0 + 10 * MINUTE).await.unwrap()), 1);
}

/// Keeps Redis busy for `ms` with another client's script (as a slow or
/// overloaded server would be); resolves when it is done.
fn keep_redis_busy(url: String, ms: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut c = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let spin = "local s = redis.call('TIME') \
            local stop = s[1] * 1000000 + s[2] + tonumber(ARGV[1]) * 1000 \
            repeat local t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop \
            return 1";
        let _: i64 = redis::cmd("EVAL")
            .arg(spin)
            .arg(0)
            .arg(ms)
            .query_async(&mut c)
            .await
            .unwrap();
    })
}

/// Callers that give up on a busy Redis decide without it; what their
/// calls charged once Redis ran them is given back, so nothing is counted
/// twice. (A call no longer waited for is not even sent, if it has not
/// been yet.)
#[tokio::test]
async fn an_admission_given_up_while_redis_is_busy_is_not_charged_in_the_end() {
    let r = common::redis::Redis::start();
    let s = instances(&r, 1).await.remove(0);
    let w = [minute("client:late:rpm", 100, 1)];
    let busy = keep_redis_busy(r.url(), 700);
    // The scenario: the busy script runs before the admission is sent...
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let first = {
        let (s, w) = (s.clone(), w.clone());
        tokio::spawn(async move { s.admit(&w, MINUTE).await.unwrap() })
    };
    // ...and that admission is in flight before the late callers come.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    // Ten callers give up waiting (a gateway decides on its own then).
    for _ in 0..10 {
        let late = tokio::time::timeout(std::time::Duration::from_millis(30), s.admit(&w, MINUTE));
        assert!(late.await.is_err(), "Redis is busy: no answer yet");
    }
    busy.await.unwrap();
    assert_eq!(first.await.unwrap(), Admission::Admitted(vec![1]));
    // Their charges, once run, are given back: the window holds the one.
    let c = redis::Client::open(r.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    common::eventually(
        || {
            let mut c = c.clone();
            async move {
                let t: Option<i64> = redis::cmd("HGET")
                    .arg("client:late:rpm")
                    .arg("t")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                t == Some(1)
            }
        },
        "the given-up charges given back",
    )
    .await;
    assert_eq!(
        s.admit(&w, MINUTE).await.unwrap(),
        Admission::Admitted(vec![2])
    );
}

#[tokio::test]
async fn an_admission_after_redis_lost_its_scripts_loads_it_again() {
    let r = common::redis::Redis::start();
    let s = &instances(&r, 1).await[0];
    let w = [minute("client:flushed:rpm", 10, 1)];
    assert_eq!(
        s.admit(&w, MINUTE).await.unwrap(),
        Admission::Admitted(vec![1])
    );
    let mut c = redis::Client::open(r.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut c)
        .await
        .unwrap();
    // Charged once, not twice (the first, refused NOSCRIPT ran nothing).
    assert_eq!(
        s.admit(&w, MINUTE).await.unwrap(),
        Admission::Admitted(vec![2])
    );
    assert_eq!(
        s.admit(&w, MINUTE).await.unwrap(),
        Admission::Admitted(vec![3])
    );
}

/// A renewal of one window's slice for instance `me`.
fn renewal(
    key: &str,
    limit: u64,
    commits: Vec<(Option<u64>, i64)>,
    carry: u64,
    want: u64,
) -> Renewal {
    Renewal {
        key: key.into(),
        limit,
        span: Span::Sliding(MINUTE),
        alone_ok: false,
        commits,
        carry,
        want,
        least: 1,
    }
}

/// The field a one-minute window charges at `now`.
fn bucket(now: u64) -> Option<u64> {
    minute("", 0, 0).field(now)
}

/// A slice is a reservation: the others' admissions count it as used while
/// it lives, and it is free again once it expired, without its holder
/// (an instance that died) giving it back.
#[tokio::test]
async fn a_slice_is_reserved_until_it_expires_and_then_free_without_its_holder() {
    let r = common::redis::Redis::start();
    let s = instances(&r, 1).await.remove(0);
    let now = 1_000 * MINUTE;
    let key = s.key("client:a:rpm");
    // 10 000 rpm, 3 instances: all slices together hold at most 3% (300),
    // this one's part 100.
    let g = s
        .lease("dead", &[renewal(&key, 10_000, vec![], 0, 5_000)], 3, now)
        .await
        .unwrap();
    assert_eq!(g[0].extra, 100, "{g:?}");
    let w = |cost| [minute(&key, 10_000, cost)];
    assert!(matches!(
        s.admit(&w(9_901), now).await.unwrap(),
        Admission::Refused { .. }
    ));
    assert_eq!(
        s.admit(&w(9_900), now).await.unwrap(),
        Admission::Admitted(vec![10_000])
    );
    // Its holder never renews: a lease's lifetime later the 100 are free.
    let later = now + LEASE_TTL_MS;
    assert_eq!(
        s.admit(&w(100), later).await.unwrap(),
        Admission::Admitted(vec![10_000])
    );
}

/// What a holder admitted from its slice is committed into the window with
/// its renewal (the slice shrinking by as much), and a correction to a
/// bucket that already slid out is not applied.
#[tokio::test]
async fn commits_move_from_the_slice_to_the_window() {
    let r = common::redis::Redis::start();
    let s = instances(&r, 1).await.remove(0);
    let now = 1_000 * MINUTE;
    let key = s.key("client:b:rpm");
    let g = s
        .lease("me", &[renewal(&key, 100_000, vec![], 0, 1_000)], 1, now)
        .await
        .unwrap();
    assert_eq!(g[0].extra, 1_000);
    // 400 admitted from it; 600 kept, 500 more wanted.
    let g = s
        .lease(
            "me",
            &[renewal(&key, 100_000, vec![(bucket(now), 400)], 600, 500)],
            1,
            now + 100,
        )
        .await
        .unwrap();
    assert_eq!(
        (g[0].total, g[0].others, g[0].carry, g[0].extra),
        (400, 0, 600, 500)
    );
    // Another instance sees 400 counted and 1100 held.
    let g = s
        .lease(
            "other",
            &[renewal(&key, 100_000, vec![], 0, 0)],
            1,
            now + 200,
        )
        .await
        .unwrap();
    assert_eq!((g[0].total, g[0].others), (400, 1_100));
    // A correction to a bucket a minute and more old is dropped.
    let g = s
        .lease(
            "me",
            &[renewal(
                &key,
                100_000,
                vec![(bucket(now - 2 * MINUTE), -300)],
                1_100,
                0,
            )],
            1,
            now + 300,
        )
        .await
        .unwrap();
    assert_eq!(g[0].total, 400);
}

/// Near the limit slices thin out: what is free is halved and divided among
/// the instances, a slice smaller than one request is not handed out, and
/// a slice kept past its expiry on Redis is cut to what is free.
#[tokio::test]
async fn a_nearly_full_window_hands_out_thin_slices_and_never_more_than_is_free() {
    let r = common::redis::Redis::start();
    let s = instances(&r, 1).await.remove(0);
    let now = 1_000 * MINUTE;
    let key = s.key("dep:x:tpm");
    let w = [minute(&key, 100_000, 99_000)];
    assert!(matches!(
        s.admit(&w, now).await.unwrap(),
        Admission::Admitted(_)
    ));
    // 1 000 free, 2 instances: at most 250 each.
    let mut ask = renewal(&key, 100_000, vec![], 0, 10_000);
    let g = s.lease("me", &[ask.clone()], 2, now).await.unwrap();
    assert_eq!(g[0].extra, 250);
    // One request costs 300: a 250 slice would only be kept from the others.
    ask.least = 300;
    let g = s.lease("other", &[ask.clone()], 2, now).await.unwrap();
    assert_eq!(g[0].extra, 0);
    // `me` let its slice expire on Redis and the window filled meanwhile:
    // what it asks to keep is cut to what is free.
    let full = [minute(&key, 100_000, 1_000)];
    let later = now + LEASE_TTL_MS + 1;
    assert!(matches!(
        s.admit(&full, later).await.unwrap(),
        Admission::Admitted(_)
    ));
    let g = s
        .lease("me", &[renewal(&key, 100_000, vec![], 250, 0)], 2, later)
        .await
        .unwrap();
    assert_eq!((g[0].carry, g[0].extra), (0, 0));
}

/// A budget's counter is leased like a window: the slice is reserved on the
/// counter (seeded from the usage store when Redis has none), spending is
/// committed to it, and the others can never take what a slice holds.
#[tokio::test]
async fn a_budget_counter_is_leased_in_reserved_slices() {
    let r = common::redis::Redis::start();
    let s = instances(&r, 1).await.remove(0);
    let now = 1_000 * MINUTE;
    let key = s.key("budget:team:0");
    let span = Span::Fixed {
        ttl_ms: 3_600_000,
        seed: 500,
    };
    let ask = |commits, carry, want| Renewal {
        span,
        ..renewal(&key, 1_000_000, commits, carry, want)
    };
    // $1 in micro-USD, $0.0005 spent before Redis knew the client.
    let g = s
        .lease("me", &[ask(vec![], 0, 10_000)], 1, now)
        .await
        .unwrap();
    assert_eq!((g[0].total, g[0].extra), (500, 10_000));
    let w = |cost| {
        [Window {
            key: &key,
            limit: 1_000_000,
            cost,
            span,
            alone_ok: false,
        }]
    };
    assert!(matches!(
        s.admit(&w(989_501), now).await.unwrap(),
        Admission::Refused { .. }
    ));
    // $0.004 spent from the slice: committed, the rest still held.
    let g = s
        .lease("me", &[ask(vec![(None, 4_000)], 6_000, 0)], 1, now + 100)
        .await
        .unwrap();
    assert_eq!((g[0].total, g[0].carry), (4_500, 6_000));
    assert!(matches!(
        s.admit(&w(989_501), now + 200).await.unwrap(),
        Admission::Refused { .. }
    ));
    assert_eq!(
        s.admit(&w(989_500), now + 200).await.unwrap(),
        Admission::Admitted(vec![1_000_000])
    );
}
