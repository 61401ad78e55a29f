//! The demo's I/O, shared by both builds (`#[path]`): each build differs
//! only in the runtime it runs these on.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `msg` to the TCP server on loopback `port`, ends its side of the
/// stream, and reads a reply as long as `msg`. (Not to the server's end of
/// the stream: a process forked while the server held the connection keeps
/// a copy of its socket, and the end would come only when that process
/// exits.)
pub async fn echo(port: u16, msg: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(&msg).await?;
    s.shutdown().await?;
    let mut reply = vec![0; msg.len()];
    s.read_exact(&mut reply).await?;
    Ok(reply)
}

/// Writes `data` to `path` with `tokio::fs`, and reads it back.
pub async fn write_read(path: String, data: Vec<u8>) -> std::io::Result<Vec<u8>> {
    tokio::fs::write(&path, &data).await?;
    tokio::fs::read(&path).await
}

/// Sleeps on the runtime's timer.
pub async fn sleep(seconds: f64) {
    tokio::time::sleep(std::time::Duration::from_secs_f64(
        seconds.clamp(0.0, 3600.0),
    ))
    .await
}
