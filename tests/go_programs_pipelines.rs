//! "Go Concurrency Patterns: Pipelines and cancellation" (Sameer Ajmani, the Go blog, 2014),
//! ported to gort: `gen`, `sq` and `merge` with a `done` channel closed early (explicit
//! cancellation), and `MD5All` with bounded parallelism (a walker, 20 digesters, a results
//! channel closed by a `WaitGroup`), over an in-memory tree instead of a file system; and the
//! same `MD5All` on an errgroup with a context, as x/sync/errgroup's package example.
//!
//! Go's `close(done)` is `Sender::close` on a `bounded::<()>(0)`: every `done.recv()` then
//! returns `None` at once, in every `select!` that waits on it. Twists: the consumer stops
//! early, the downstream channel is closed while senders block in `select!` (Go would panic:
//! "send on closed channel"; gort's send fails and the arm is chosen with the error), a
//! digester that panics, and the runtime dropped mid-walk. Run on 1 and 4 Ps.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gort::chan::{bounded, Receiver, Sender};
use gort::context::{self, Context};
use gort::select;
use gort::sync::{ErrGroup, WaitGroup};
use support::{rt, wait_tasks, within};

/// Go's `gen(done, nums...)`.
fn gen(done: Receiver<()>, nums: Vec<u64>) -> Receiver<u64> {
    let (out, rx) = bounded(0);
    gort::spawn(async move {
        for n in nums {
            select! {
                r = out.send(n) => if r.is_err() { return },
                _ = done.recv() => return,
            }
        }
    });
    rx
}

/// Go's `sq(done, in)`.
fn sq(done: Receiver<()>, input: Receiver<u64>) -> Receiver<u64> {
    let (out, rx) = bounded(0);
    gort::spawn(async move {
        while let Some(n) = input.recv().await {
            select! {
                r = out.send(n * n) => if r.is_err() { return },
                _ = done.recv() => return,
            }
        }
    });
    rx
}

/// Go's `merge(done, cs...)`: one forwarding task per input, a `WaitGroup` that closes `out`.
fn merge(done: Receiver<()>, cs: Vec<Receiver<u64>>) -> Receiver<u64> {
    let (out, rx) = bounded(0);
    let wg = WaitGroup::new();
    wg.add(cs.len() as isize);
    for c in cs {
        let (out, done, wg) = (out.clone(), done.clone(), wg.clone());
        gort::spawn(async move {
            while let Some(n) = c.recv().await {
                select! {
                    r = out.send(n) => if r.is_err() { break },
                    _ = done.recv() => break,
                }
            }
            wg.done();
        });
    }
    gort::spawn(async move {
        wg.wait().await;
        out.close();
    });
    rx
}

/// The blog's final `main`: two `sq` workers fan out from one `gen`, `merge` fans in, and
/// the consumer takes only the first value, then closes `done`: every stage ends.
#[test]
fn gen_sq_merge_done_closed_early() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            for _ in 0..200 {
                let first = rt.block_on(async {
                    let (done_tx, done) = bounded::<()>(0);
                    let input = gen(done.clone(), (2..1000).collect());
                    let c1 = sq(done.clone(), input.clone());
                    let c2 = sq(done.clone(), input);
                    let out = merge(done, vec![c1, c2]);
                    let first = out.recv().await.unwrap();
                    done_tx.close(); // Go: defer close(done)
                    first
                });
                assert!(first == 4 || first == 9, "{first}");
            }
            wait_tasks(&rt, base);
            // And the full run: every square once.
            let sum = rt.block_on(async {
                let (_done_tx, done) = bounded::<()>(0);
                let input = gen(done.clone(), (1..=1000).collect());
                let cs = (0..4).map(|_| sq(done.clone(), input.clone())).collect();
                let out = merge(done, cs);
                let mut sum = 0;
                while let Some(v) = out.recv().await {
                    sum += v;
                }
                sum
            });
            assert_eq!(sum, (1..=1000u64).map(|n| n * n).sum());
            wait_tasks(&rt, base);
        });
    }
}

/// The consumer closes the merged channel itself (from the receiving side) while the
/// forwarders are blocked in `select!` on `out.send(n)` and a `done` nobody will close:
/// Go would panic ("send on closed channel"); here each blocked send fails, its arm is
/// chosen with the value given back, and every stage ends.
#[test]
fn channel_closed_while_senders_block_in_select() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let (_done_tx, done) = bounded::<()>(0);
            rt.block_on(async {
                let input = gen(done.clone(), (0..100_000).collect());
                let cs = (0..8).map(|_| sq(done.clone(), input.clone())).collect();
                let out = merge(done.clone(), cs);
                for _ in 0..100 {
                    out.recv().await.unwrap();
                }
                // Let all eight forwarders park in their select.
                gort::time::sleep(Duration::from_millis(5)).await;
                out.close();
                assert_eq!(out.recv().await, None);
            });
            wait_tasks(&rt, base);
        });
    }
}

// ---- MD5All with bounded parallelism, over an in-memory tree ----

/// RFC 1321's MD5 (Go's `crypto/md5.Sum`), enough for the walker.
fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4294967296.0) as u32)
        .collect();
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    let mut h: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk
            .chunks(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0; 16];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
    out
}

#[test]
fn md5_known_vectors() {
    let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(
        hex(md5(b"The quick brown fox jumps over the lazy dog")),
        "9e107d9d372bb6826bd81d3542a419d6"
    );
}

/// An in-memory file system: path -> contents, or `None` for a file that cannot be read.
type Tree = Arc<BTreeMap<String, Option<Vec<u8>>>>;

fn make_tree(files: usize, unreadable: Option<usize>) -> Tree {
    let mut t = BTreeMap::new();
    for i in 0..files {
        let path = format!("/root/d{}/d{}/f{i}.txt", i % 7, i % 3);
        let body = (0..(i * 37) % 3000).map(|j| (i * 31 + j) as u8).collect();
        t.insert(
            path,
            if Some(i) == unreadable {
                None
            } else {
                Some(body)
            },
        );
    }
    Arc::new(t)
}

/// Go's `ioutil.ReadFile` on the tree: yields first, as a real read would park.
async fn read_file(tree: &Tree, path: &str) -> Result<Vec<u8>, String> {
    gort::yield_now().await;
    match tree.get(path) {
        Some(Some(body)) => Ok(body.clone()),
        _ => Err(format!("open {path}: permission denied")),
    }
}

/// Go's `walkFiles(done, root)`: the paths on an unbuffered channel, the walk's error on a
/// channel of one.
fn walk_files(done: Receiver<()>, tree: Tree) -> (Receiver<String>, Receiver<Result<(), String>>) {
    let (paths_tx, paths) = bounded(0);
    let (errc_tx, errc) = bounded(1);
    gort::spawn(async move {
        let mut res = Ok(());
        for path in tree.keys() {
            select! {
                r = paths_tx.send(path.clone()) => if r.is_err() {
                    res = Err("walk canceled".to_string());
                    break;
                },
                _ = done.recv() => {
                    res = Err("walk canceled".to_string());
                    break;
                }
            }
        }
        paths_tx.close(); // Go: defer close(paths)
        let _ = errc_tx.try_send(res);
    });
    (paths, errc)
}

type Sum = (String, Result<[u8; 16], String>);

/// Go's `digester(done, paths, c)`. A digester of `crash_on` panics on that path.
async fn digester(
    tree: Tree,
    done: Receiver<()>,
    paths: Receiver<String>,
    c: Sender<Sum>,
    crash_on: Option<String>,
) {
    while let Some(path) = paths.recv().await {
        if crash_on.as_deref() == Some(&path) {
            panic!("digester crashed on {path}");
        }
        let sum = read_file(&tree, &path).await.map(|d| md5(&d));
        select! {
            r = c.send((path, sum)) => if r.is_err() { return },
            _ = done.recv() => return,
        }
    }
}

/// Go's `MD5All(root)`: 20 digesters; returns early on the first read error, closing `done`
/// (Go's `defer close(done)`) so that the walker and every digester end.
async fn md5_all(
    tree: Tree,
    crash_on: Option<String>,
) -> Result<BTreeMap<String, [u8; 16]>, String> {
    let (done_tx, done) = bounded::<()>(0);
    let _close_done = CloseOnDrop(done_tx);
    let (paths, errc) = walk_files(done.clone(), tree.clone());
    let (c_tx, c) = bounded(0);
    let wg = WaitGroup::new();
    const DIGESTERS: usize = 20;
    for _ in 0..DIGESTERS {
        let (tree, done, paths, c_tx) = (tree.clone(), done.clone(), paths.clone(), c_tx.clone());
        // Go 1.25's wg.Go: the Add before, the Done however the digester ends.
        wg.go(digester(tree, done, paths, c_tx, crash_on.clone()));
    }
    gort::spawn(async move {
        wg.wait().await;
        c_tx.close(); // Go: close(c)
    });
    let mut m = BTreeMap::new();
    while let Some((path, sum)) = c.recv().await {
        m.insert(path, sum?);
    }
    errc.recv().await.unwrap_or(Err("walker lost".into()))?;
    Ok(m)
}

/// Go's `defer close(done)`.
struct CloseOnDrop(Sender<()>);
impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[test]
fn md5_all_bounded_parallelism() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let tree = make_tree(500, None);
            let got = rt.block_on(md5_all(tree.clone(), None)).unwrap();
            assert_eq!(got.len(), 500);
            for (path, body) in tree.iter() {
                assert_eq!(got[path], md5(body.as_ref().unwrap()), "{path}");
            }
            wait_tasks(&rt, base);
        });
    }
}

/// A file that cannot be read: `MD5All` returns its error at once, `done` closes, and the
/// walker and the 20 digesters (blocked in `select!` on sends nobody takes) all end.
#[test]
fn md5_all_stops_on_first_error() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            for bad in [0, 17, 250, 499] {
                let tree = make_tree(500, Some(bad));
                let err = rt.block_on(md5_all(tree, None)).unwrap_err();
                assert!(err.contains("permission denied"), "{err}");
                wait_tasks(&rt, base);
            }
        });
    }
}

/// A digester that panics mid-walk: `WaitGroup::go` still counts it done (Go's `defer`),
/// the others carry on; the path it held is lost, so the result misses exactly that file.
#[test]
fn md5_all_with_a_crashing_digester() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let tree = make_tree(300, None);
            let victim = tree.keys().nth(100).unwrap().clone();
            let got = rt
                .block_on(md5_all(tree.clone(), Some(victim.clone())))
                .unwrap();
            assert_eq!(got.len(), 299);
            assert!(!got.contains_key(&victim));
            wait_tasks(&rt, base);
        });
    }
}

/// The runtime dropped while `MD5All` runs on other threads' tasks: no hang, no abort.
#[test]
fn md5_all_runtime_dropped_mid_walk() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let tree = make_tree(2000, None);
            for _ in 0..4 {
                drop(rt.spawn(md5_all(tree.clone(), None)));
            }
            std::thread::sleep(Duration::from_millis(3));
            support::drop_within(rt, Duration::from_secs(10), "runtime drop hung");
        });
    }
}

// ---- The same MD5All on an errgroup (x/sync/errgroup's package example "pipeline") ----

/// x/sync/errgroup's `MD5All(ctx, root)`: the walker and 20 digesters in one
/// `errgroup.WithContext`; the first read error cancels the group's context, which ends the
/// walker and every digester blocked in `select!`.
///
/// Go's example ends with `go func() { g.Wait(); close(c) }()` and then a second `g.Wait()`
/// for the error: two concurrent `Wait`s that both get the first error. gort's
/// `ErrGroup::wait` moves the error out to ONE of them (its doc says so; `E` need not be
/// `Clone`), so a literal port could return the partial map as a success. The closer task
/// waits alone here and hands the result over on a channel.
async fn md5_all_errgroup(
    parent: &Context,
    tree: Tree,
) -> Result<BTreeMap<String, [u8; 16]>, String> {
    let (g, ctx) = ErrGroup::<String>::with_context(parent);
    let (paths_tx, paths) = bounded::<String>(0);
    {
        let (ctx, tree) = (ctx.clone(), tree.clone());
        g.spawn(async move {
            for path in tree.keys() {
                select! {
                    r = paths_tx.send(path.clone()) => r.map_err(|_| "paths closed".to_string())?,
                    _ = ctx.done().recv() => return Err(ctx.err().unwrap().to_string()),
                }
            }
            Ok(()) // paths_tx dropped: Go's defer close(paths)
        });
    }
    let (c_tx, c) = bounded::<(String, [u8; 16])>(0);
    for _ in 0..20 {
        let (ctx, tree, paths, c_tx) = (ctx.clone(), tree.clone(), paths.clone(), c_tx.clone());
        g.spawn(async move {
            while let Some(path) = paths.recv().await {
                let data = read_file(&tree, &path).await?;
                select! {
                    _ = c_tx.send((path, md5(&data))) => {}
                    _ = ctx.done().recv() => return Err(ctx.err().unwrap().to_string()),
                }
            }
            Ok(())
        });
    }
    drop((paths, c_tx));
    let g = Arc::new(g);
    let (result_tx, result) = bounded(1);
    {
        let g = g.clone();
        gort::spawn(async move {
            let r = g.wait().await; // Go: g.Wait(); close(c) (c closes as the digesters end)
            let _ = result_tx.send(r).await;
        });
    }
    let mut m = BTreeMap::new();
    while let Some((path, sum)) = c.recv().await {
        m.insert(path, sum);
    }
    result.recv().await.expect("the group's waiter died")?;
    Ok(m)
}

#[test]
fn md5_all_errgroup_pipeline() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            rt.block_on(async {
                let bg = Context::background();
                let tree = make_tree(400, None);
                let got = md5_all_errgroup(&bg, tree.clone()).await.unwrap();
                assert_eq!(got.len(), 400);
                for (path, body) in tree.iter() {
                    assert_eq!(got[path], md5(body.as_ref().unwrap()));
                }
                // A read error: the error itself comes back, never a partial success.
                for bad in [0, 199, 399] {
                    let err = md5_all_errgroup(&bg, make_tree(400, Some(bad))).await;
                    assert!(err.unwrap_err().contains("permission denied"));
                }
                // The caller's context canceled mid-walk.
                let (ctx, cancel) = context::with_cancel(&bg);
                let walk = gort::spawn({
                    let ctx = ctx.clone();
                    async move { md5_all_errgroup(&ctx, make_tree(5000, None)).await }
                });
                gort::time::sleep(Duration::from_millis(2)).await;
                cancel.cancel();
                match walk.await.unwrap() {
                    Err(e) => assert_eq!(e, "context canceled"),
                    Ok(m) => assert_eq!(m.len(), 5000, "finished before the cancel"),
                }
            });
            wait_tasks(&rt, base);
        });
    }
}

/// The full pipeline read by an impatient consumer: every receive is raced against a
/// 0-50 µs timeout (`select!` on `out.recv()` and `time::after`), so most receives are
/// dropped while they wait, some just as a forwarder hands them a value. No value is lost
/// or doubled: the sum of squares is exact.
#[test]
fn impatient_consumer_loses_nothing() {
    for procs in [1, 4] {
        within(move || {
            let rt = rt(procs);
            let base = rt.metrics().tasks_alive;
            let (sum, gave_up) = rt.block_on(async {
                let (_done_tx, done) = bounded::<()>(0);
                let input = gen(done.clone(), (1..=3000).collect());
                let cs = (0..4).map(|_| sq(done.clone(), input.clone())).collect();
                let out = merge(done, cs);
                let (mut sum, mut gave_up, mut i) = (0u64, 0u64, 0u64);
                loop {
                    i += 1;
                    let patience = gort::time::after(Duration::from_micros(i % 51));
                    select! {
                        v = out.recv() => match v {
                            Some(v) => sum += v,
                            None => break,
                        },
                        _ = patience.recv() => gave_up += 1,
                    }
                }
                (sum, gave_up)
            });
            assert_eq!(sum, (1..=3000u64).map(|n| n * n).sum::<u64>());
            println!("procs {procs}: gave up {gave_up} times");
            wait_tasks(&rt, base);
        });
    }
}
