//! tokio's modules across real forks, in a `harness = false` binary
//! (libtest's threads could hold locks at a fork). Each scenario builds a
//! [`ForkSafeRuntime`], uses one tokio module in the parent, then forks
//! `FORKSAFE_ROUNDS` times (default 3): each child uses the same module on
//! its own runtime under a watchdog, and after each child the parent uses
//! the module again, so a child that broke the parent's runtime (its epoll
//! instance, its signal pipe) fails the scenario too. Every use has its own
//! timeout, so a failure is an error that names what hung.
//!
//! `plain_runtime_child_hangs` is the control: a plain tokio runtime used
//! in the parent hangs in the child (the watchdog kills it, and the
//! scenario passes only if it does).
//!
//! The crate docs' module table is the summary of these scenarios.

use forksafe_testkit::child::{fork_raw, quiet_panics, wait_child};
use forksafe_tokio::{ForkSafeRuntime, RuntimeBuilder};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The watchdog's limit per child.
const LIMIT: Duration = Duration::from_secs(30);
/// The limit of one use of a module, inside the runtime.
const USE_LIMIT: Duration = Duration::from_secs(10);

fn rounds() -> usize {
    std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

type Use = fn(&ForkSafeRuntime) -> Result<(), String>;

/// Runs `body` on `rt` with a timeout, as one use of a module.
fn within<F>(rt: &ForkSafeRuntime, what: &str, body: F) -> Result<(), String>
where
    F: std::future::Future<Output = Result<(), String>>,
{
    rt.block_on(async {
        match tokio::time::timeout(USE_LIMIT, body).await {
            Ok(r) => r,
            Err(_) => Err(format!("{what}: timed out after {USE_LIMIT:?}")),
        }
    })
    .map_err(|e| format!("{what}: {e}"))?
    .map_err(|e| format!("{what}: {e}"))
}

fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn net_tcp(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "tcp echo", async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(e2s)?;
        let addr = listener.local_addr().map_err(e2s)?;
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await?;
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await?;
            s.write_all(&buf).await?;
            Ok::<_, std::io::Error>(())
        });
        let mut c = tokio::net::TcpStream::connect(addr).await.map_err(e2s)?;
        c.write_all(b"hello").await.map_err(e2s)?;
        let mut back = [0u8; 5];
        c.read_exact(&mut back).await.map_err(e2s)?;
        server.await.map_err(e2s)?.map_err(e2s)?;
        (&back == b"hello")
            .then_some(())
            .ok_or_else(|| format!("echoed {back:?}"))
    })
}

fn net_udp(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "udp round trip", async {
        let a = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .map_err(e2s)?;
        let b = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .map_err(e2s)?;
        a.send_to(b"ping", b.local_addr().map_err(e2s)?)
            .await
            .map_err(e2s)?;
        let mut buf = [0u8; 4];
        let (n, from) = b.recv_from(&mut buf).await.map_err(e2s)?;
        if &buf[..n] != b"ping" || from != a.local_addr().map_err(e2s)? {
            return Err(format!("got {:?} from {from}", &buf[..n]));
        }
        Ok(())
    })
}

fn net_unix(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "unix stream pair", async {
        let (mut a, mut b) = tokio::net::UnixStream::pair().map_err(e2s)?;
        a.write_all(b"unix").await.map_err(e2s)?;
        let mut buf = [0u8; 4];
        b.read_exact(&mut buf).await.map_err(e2s)?;
        (&buf == b"unix")
            .then_some(())
            .ok_or_else(|| format!("read {buf:?}"))
    })
}

fn time(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "timers", async {
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        for _ in 0..3 {
            tick.tick().await;
        }
        let never = std::future::pending::<()>();
        if tokio::time::timeout(Duration::from_millis(10), never)
            .await
            .is_ok()
        {
            return Err("a pending future finished".into());
        }
        (start.elapsed() >= Duration::from_millis(20))
            .then_some(())
            .ok_or_else(|| "slept less than asked".to_string())
    })
}

fn fs(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "fs write and read", async {
        let dir = std::env::temp_dir().join(format!("forksafe-tokio-fs-{}", std::process::id()));
        tokio::fs::create_dir_all(&dir).await.map_err(e2s)?;
        let file = dir.join("data");
        tokio::fs::write(&file, b"written in this process")
            .await
            .map_err(e2s)?;
        let back = tokio::fs::read(&file).await.map_err(e2s)?;
        tokio::fs::remove_dir_all(&dir).await.map_err(e2s)?;
        (back == b"written in this process")
            .then_some(())
            .ok_or_else(|| "read something else".to_string())
    })
}

fn sync(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "channels, mutex, notify", async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let lock = std::sync::Arc::new(tokio::sync::Mutex::new(0u32));
        let notify = std::sync::Arc::new(tokio::sync::Notify::new());
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let (l, n) = (lock.clone(), notify.clone());
        tokio::spawn(async move {
            for i in 0..10u32 {
                *l.lock().await += i;
                if tx.send(i).await.is_err() {
                    return;
                }
            }
            n.notify_one();
            let _ = done_tx.send(());
        });
        let mut sum = 0;
        for _ in 0..10 {
            sum += rx.recv().await.ok_or("channel closed")?;
        }
        notify.notified().await;
        done_rx.await.map_err(e2s)?;
        let locked = *lock.lock().await;
        (sum == 45 && locked == 45)
            .then_some(())
            .ok_or_else(|| format!("sum {sum}, locked {locked}"))
    })
}

fn io(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "duplex copy", async {
        let (mut a, mut b) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            for _ in 0..100 {
                a.write_all(b"0123456789").await?;
            }
            a.shutdown().await
        });
        let mut all = Vec::new();
        b.read_to_end(&mut all).await.map_err(e2s)?;
        writer.await.map_err(e2s)?.map_err(e2s)?;
        (all.len() == 1000)
            .then_some(())
            .ok_or_else(|| format!("read {} bytes", all.len()))
    })
}

fn signal(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "SIGUSR1 to this process", async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut usr1 = signal(SignalKind::user_defined1()).map_err(e2s)?;
        // SAFETY: kill(2) on this process's own pid with a signal tokio
        // now handles.
        if unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) } != 0 {
            return Err("kill failed".into());
        }
        usr1.recv().await.ok_or("signal stream ended")?;
        Ok(())
    })
}

fn process(rt: &ForkSafeRuntime) -> Result<(), String> {
    within(rt, "spawn and wait for a process", async {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("echo $$")
            .output()
            .await
            .map_err(e2s)?;
        if !out.status.success() {
            return Err(format!("status {}", out.status));
        }
        let mut child = tokio::process::Command::new("true").spawn().map_err(e2s)?;
        let status = child.wait().await.map_err(e2s)?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("true: {status}"))
    })
}

/// Uses `module` in the parent, then forks: each child uses it, and the
/// parent uses it again after each child.
fn across_forks(name: &str, module: Use) {
    let rt = RuntimeBuilder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    module(&rt).unwrap_or_else(|e| panic!("{name}: parent, before any fork: {e}"));
    for round in 0..rounds() {
        let pid = fork_raw(|| {
            if rt.is_built() {
                return Err("the child sees the parent's runtime as its own".into());
            }
            module(&rt)?;
            module(&rt)?;
            Ok(String::new())
        })
        .expect("fork");
        wait_child(pid, LIMIT).unwrap_or_else(|e| panic!("{name}, round {round}: child: {e}"));
        module(&rt)
            .unwrap_or_else(|e| panic!("{name}, round {round}: parent after its child: {e}"));
    }
}

/// The parent's signals while a child with a runtime lives: the child's
/// signal driver must not drain the parent's wake-ups (nor the parent the
/// child's).
fn signal_parent_while_child_lives() {
    let rt = RuntimeBuilder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    signal(&rt).expect("parent, before the fork");
    let pid = fork_raw(|| {
        // Both wait on their own signals at once: the child for its
        // SIGUSR2s, the parent (below) for its SIGUSR1s.
        within(&rt, "the child's SIGUSR2s", async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut usr2 = signal(SignalKind::user_defined2()).map_err(e2s)?;
            for _ in 0..50 {
                // SAFETY: kill(2) on this process's own pid with a signal
                // tokio now handles.
                unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
                usr2.recv().await.ok_or("signal stream ended")?;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(())
        })?;
        Ok(String::new())
    })
    .expect("fork");
    let parent = within(&rt, "the parent's SIGUSR1s while the child lives", async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut usr1 = signal(SignalKind::user_defined1()).map_err(e2s)?;
        for i in 0..50 {
            // SAFETY: as above.
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
            tokio::time::timeout(Duration::from_secs(2), usr1.recv())
                .await
                .map_err(|_| format!("signal {i} never arrived"))?
                .ok_or("signal stream ended")?;
        }
        Ok(())
    });
    let child = wait_child(pid, LIMIT);
    parent.unwrap_or_else(|e| panic!("parent: {e}"));
    child.unwrap_or_else(|e| panic!("child: {e}"));
}

/// The control: a plain runtime used in the parent hangs in the child.
fn plain_runtime_child_hangs() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async { tokio::spawn(async { 1 }).await })
        .expect("parent");
    let pid = fork_raw(|| {
        let v = rt.block_on(async { tokio::spawn(async { 2 }).await });
        Ok(format!("the plain runtime answered {v:?}"))
    })
    .expect("fork");
    match wait_child(pid, Duration::from_secs(3)) {
        Err(e) if e.contains("hung") => {}
        other => panic!("a plain runtime's child was expected to hang: {other:?}"),
    }
}

fn main() {
    quiet_panics(None);
    let modules: [(&'static str, Use); 9] = [
        ("net_tcp", net_tcp),
        ("net_udp", net_udp),
        ("net_unix", net_unix),
        ("time", time),
        ("fs", fs),
        ("sync", sync),
        ("io", io),
        ("signal", signal),
        ("process", process),
    ];
    let mut names: Vec<&'static str> = modules.iter().map(|(n, _)| *n).collect();
    names.push("signal_parent_while_child_lives");
    names.push("plain_runtime_child_hangs");
    forksafe_testkit::harness::run(&names, |name| {
        let start = Instant::now();
        if name == "plain_runtime_child_hangs" {
            plain_runtime_child_hangs();
        } else if name == "signal_parent_while_child_lives" {
            signal_parent_while_child_lives();
        } else if let Some(&(_, module)) = modules.iter().find(|(n, _)| *n == name) {
            across_forks(name, module);
        }
        println!(
            "forksafe-tokio {name}: ok ({:.1} s)",
            start.elapsed().as_secs_f64()
        );
    });
}
