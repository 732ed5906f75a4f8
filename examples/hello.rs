//! The README's example: a task, an unbuffered channel, a timer and `select!`.
//!
//! `cargo run --example hello`

use std::time::Duration;

#[gort::main]
async fn main() {
    let (tx, rx) = gort::chan::bounded(0); // unbuffered: a rendezvous, as in Go
    gort::spawn(async move {
        gort::time::sleep(Duration::from_millis(10)).await;
        tx.send("tick").await.unwrap();
    });
    let deadline = gort::time::after(Duration::from_secs(1));
    gort::select! {
        v = rx.recv() => println!("got {v:?}"),
        _ = deadline.recv() => println!("timed out"),
    }
}
