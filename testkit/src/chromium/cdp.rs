//! A headless Chromium with its DevTools endpoint, and a minimal Chrome DevTools Protocol
//! client: what the dashboard's browser tests and its first-paint measurement
//! (`smdebug-serve/examples/first_paint.rs`) drive a page with.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// Headless chromium with its DevTools endpoint on a free loopback port; killed on drop.
pub struct Browser {
    child: Child,
    /// The DevTools WebSocket address Chromium printed.
    pub ws_url: String,
    /// Every line Chromium wrote to stderr.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Browser {
    /// Starts Chromium with its profile in `profile` and waits (30 s at most) for its DevTools
    /// address.
    pub fn launch(binary: &Path, profile: &Path) -> Browser {
        let mut child = Command::new(binary)
            .args(super::headless::HEADLESS)
            .args([
                "--disable-extensions",
                "--no-default-browser-check",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1400,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let keep = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = tx.send(line[at..].trim().to_owned());
                }
                keep.lock().unwrap().push(line);
            }
        });
        let ws_url = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "chromium printed no DevTools address within 30 s: {:?}",
                    lines.lock().unwrap()
                );
            }
        };
        Browser {
            child,
            ws_url,
            stderr: lines,
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal Chrome DevTools Protocol client: commands on one page session, events kept.
pub struct Cdp {
    ws: WebSocket<TcpStream>,
    next: u64,
    /// The page session commands go to (`Target.attachToTarget`), if any.
    pub session: Option<String>,
    /// Events read so far.
    pub events: Vec<Value>,
}

impl Cdp {
    pub fn connect(ws_url: &str) -> Cdp {
        let rest = ws_url.strip_prefix("ws://").unwrap();
        let host = &rest[..rest.find('/').unwrap()];
        let stream = TcpStream::connect(host).unwrap();
        let (ws, _) = tungstenite::client(ws_url, stream).unwrap();
        // Reads give up after 100 ms, so that waits stay bounded.
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Cdp {
            ws,
            next: 1,
            session: None,
            events: Vec::new(),
        }
    }

    /// One message, or `None` after the read timeout.
    fn read(&mut self) -> Option<Value> {
        match self.ws.read() {
            Ok(Message::Text(text)) => Some(serde_json::from_str(&text).unwrap()),
            Ok(_) => None,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("DevTools connection: {e}"),
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < end, "no answer to {method} within 30 s");
            let Some(v) = self.read() else { continue };
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Reads events for `d`.
    pub fn pump(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if let Some(v) = self.read()
                && v.get("method").is_some()
            {
                self.events.push(v);
            }
        }
    }

    /// Loads `url` in the page (`Page.navigate`); what a test waits for next is its own.
    pub fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
    }

    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// The page's self-reported status (`document.body.dataset.status`).
    pub fn status(&mut self) -> Value {
        let s = self.eval("(document.body && document.body.dataset.status) || 'null'");
        serde_json::from_str(s.as_str().unwrap_or("null")).unwrap()
    }

    pub fn wait(&mut self, limit: Duration, what: &str, mut f: impl FnMut(&mut Cdp) -> bool) {
        let end = Instant::now() + limit;
        while !f(self) {
            assert!(
                Instant::now() < end,
                "timed out after {limit:?} waiting for {what}; status {}",
                self.status()
            );
            self.pump(Duration::from_millis(100));
        }
    }

    /// Drags the mouse with its left button held along the line at height `y`, from `x0` to
    /// `x1` (page coordinates), as a person selecting a range on a chart does.
    pub fn drag(&mut self, y: f64, x0: f64, x1: f64) {
        for (kind, at) in [
            ("mouseMoved", x0),
            ("mousePressed", x0),
            ("mouseMoved", (x0 + x1) / 2.0),
            ("mouseMoved", x1),
            ("mouseReleased", x1),
        ] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": at, "y": y, "button": "left", "clickCount": 1,
                       "buttons": if kind == "mouseReleased" { 0 } else { 1 }}),
            );
        }
    }

    /// The page as a PNG image: what the viewport shows, or the whole page with `whole_page`.
    pub fn png(&mut self, whole_page: bool) -> Vec<u8> {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": whole_page}),
        );
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap()
    }

    /// Writes the whole page as a PNG image at `path`, checking it is one and not blank.
    pub fn screenshot(&mut self, path: &Path) {
        let png = self.png(true);
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 20_000,
            "{} bytes",
            png.len()
        );
        std::fs::write(path, png).unwrap();
    }
}
