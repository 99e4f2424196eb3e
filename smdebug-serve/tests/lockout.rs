//! Nobody on the same machine locks the person out: event streams held by another local
//! process, from one loopback address or many, leave room for the person's page and API
//! requests (the oldest stream is closed first), and a request whose body never arrives is
//! answered and closed at the body timeout, with or without the token.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use smdebug_serve::{ConnectionLimits, ServeOptions, Server};
use support::{client, closed_within};

/// Opens an event stream on a new connection from `from` (a loopback address) and waits for
/// its response head; the socket is returned open.
fn open_stream(server: SocketAddr, from: IpAddr, token: Option<&str>) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let socket = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        socket.connect(server).await.unwrap().into_std().unwrap()
    });
    drop(runtime);
    let mut socket = socket;
    socket.set_nonblocking(false).unwrap();
    let token = token.map_or(String::new(), |t| format!("x-smdebug-token: {t}\r\n"));
    let request = format!(
        "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{token}\r\n",
        server.port()
    );
    socket.write_all(request.as_bytes()).unwrap();
    let head = read_head(&mut socket, Duration::from_secs(30));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    socket
}

/// The response head (up to the blank line), or what arrived before the socket closed or
/// `limit` passed.
fn read_head(socket: &mut TcpStream, limit: Duration) -> String {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let end = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while Instant::now() < end && !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The person: the page, the runs and a run's overview, each on a new connection.
fn person_is_served(server: &Server, token: Option<&str>) {
    let c = client();
    let root = format!("http://{}", server.addr());
    for path in ["/", "/api/runs", "/api/runs/0/overview"] {
        let mut request = c.get(format!("{root}{path}"));
        if let Some(t) = token {
            request = request.header("x-smdebug-token", t);
        }
        let response = request.send().unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(response.status(), 200, "{path}");
    }
}

#[test]
fn streams_held_by_a_local_process_leave_room_for_the_person() {
    let dir = tempfile::tempdir().unwrap();
    let options = ServeOptions::new([dir.path()]);
    // The real limits: 256 connections, 128 streams, 16 a client address.
    let limits = options.limits;
    assert!(limits.max_streams < limits.max_connections, "{limits:?}");
    assert!(
        limits.max_streams_per_client < limits.max_streams,
        "{limits:?}"
    );
    let server = Server::start(options).unwrap();
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);

    // One local process holds 300 streams from 127.0.0.1: more than the server's connections.
    let mut held: Vec<TcpStream> = (0..300)
        .map(|_| open_stream(server.addr(), loopback, None))
        .collect();
    let stats = server.connections();
    assert!(stats.streams <= limits.max_streams_per_client, "{stats:?}");
    assert!(
        stats.closed.streams >= 300 - limits.max_streams_per_client,
        "{stats:?}"
    );
    // The oldest went first; the newest is still served.
    assert!(closed_within(&mut held[0], Duration::from_secs(30)));
    assert!(!closed_within(
        held.last_mut().unwrap(),
        Duration::from_millis(500)
    ));
    // The person's page and API requests, and the person's own stream, are served.
    for _ in 0..5 {
        person_is_served(&server, None);
    }
    let mut own = open_stream(server.addr(), loopback, None);
    assert!(!closed_within(&mut own, Duration::from_millis(500)));

    // From 40 loopback addresses (a process may bind any of 127.0.0.0/8), 16 streams each:
    // 640 streams, more than the server's 256 connections; the streams in all stay at 128.
    let mut many = Vec::new();
    for a in 2..42u8 {
        let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, a));
        for _ in 0..16 {
            many.push(open_stream(server.addr(), from, None));
        }
    }
    let stats = server.connections();
    assert!(stats.streams <= limits.max_streams, "{stats:?}");
    assert!(stats.open <= limits.max_connections, "{stats:?}");
    for _ in 0..5 {
        person_is_served(&server, None);
    }
    drop(held);
    drop(many);
    drop(own);
    server.shutdown();
}

#[test]
fn the_server_full_of_idle_kept_alive_connections_still_serves_the_person() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new([dir.path()]);
    options.limits = ConnectionLimits {
        max_connections: 32,
        ..ConnectionLimits::default()
    };
    let server = Server::start(options).unwrap();
    // 64 connections that each made a request on loopback (trusted) and stay open, idle.
    let request = format!(
        "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        server.addr().port()
    );
    let mut kept = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let head = read_head(&mut s, Duration::from_secs(30));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        kept.push(s);
    }
    let stats = server.connections();
    assert!(stats.open <= 32, "{stats:?}");
    assert!(stats.closed.for_room >= 32, "{stats:?}");
    for _ in 0..5 {
        person_is_served(&server, None);
    }
    drop(kept);
    server.shutdown();
}

/// Sends a stop request's head and 5 bytes of its 100-byte body, then nothing.
fn post_without_its_body(server: SocketAddr, token: Option<&str>) -> TcpStream {
    let mut s = TcpStream::connect(server).unwrap();
    let token = token.map_or(String::new(), |t| format!("x-smdebug-token: {t}\r\n"));
    let head = format!(
        "POST /api/runs/0/stop HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{token}\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"con",
        server.port()
    );
    s.write_all(head.as_bytes()).unwrap();
    s
}

#[test]
fn a_request_body_that_never_arrives_is_timed_out_with_or_without_the_token() {
    // The real default is a few seconds, far below the 150 s such a request used to stay.
    assert!(ConnectionLimits::default().body_timeout <= Duration::from_secs(10));
    for token in [None, Some("holder-token")] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServeOptions::new([dir.path()]);
        options.token = token.map(str::to_owned);
        options.limits = ConnectionLimits {
            body_timeout: Duration::from_secs(2),
            ..ConnectionLimits::default()
        };
        let server = Server::start(options).unwrap();
        let started = Instant::now();
        let mut socket = post_without_its_body(server.addr(), token);
        let head = read_head(&mut socket, Duration::from_secs(60));
        assert!(head.starts_with("HTTP/1.1 408"), "{token:?}: {head}");
        // Closed after the answer; generous bounds, only a socket held for minutes fails.
        assert!(
            closed_within(&mut socket, Duration::from_secs(30)),
            "{token:?}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_secs(40), "{token:?}: {took:?}");
        assert_eq!(server.connections().closed.body_timeouts, 1, "{token:?}");
        // Meanwhile and after, the person is served.
        person_is_served(&server, token);
        eprintln!("{token:?}: a body that never came closed after {took:?}");
        server.shutdown();
    }
}
