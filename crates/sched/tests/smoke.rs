use gort_sched::{spawn, Builder, Runtime};

#[test]
fn spawn_and_join() {
    let rt = Runtime::new().unwrap();
    let v = rt.block_on(async {
        let mut hs = Vec::new();
        for i in 0..1000u64 {
            hs.push(spawn(async move { i * 2 }));
        }
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(v, 999 * 1000);
}

#[test]
fn procs_builder() {
    let rt = Builder::new().procs(3).build().unwrap();
    assert_eq!(rt.procs(), 3);
}
