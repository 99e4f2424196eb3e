//! Measures the dashboard's first meaningful paint in a real headless Chromium, for the scale
//! figures in BENCHMARKS.md: opens `URL` in a fresh profile over the Chrome DevTools Protocol
//! and waits until the page reports the overview, system, steps and scalars panels drawn with
//! the run's data (`first_paint_ms` in the page's status, `performance.now()` at that moment:
//! milliseconds since navigation started, every API fetch included). Also prints the
//! browser's first contentful paint and the number of charts drawn.
//!
//! ```sh
//! smdebug serve /tmp/synthetic-run --port 6007 &
//! cargo run --release -p smdebug-serve --example first_paint -- http://127.0.0.1:6007/ [RUNS]
//! ```
//!
//! Each of the `RUNS` (default 3) loads use a new Chromium profile (no cache).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

struct Cdp {
    ws: WebSocket<TcpStream>,
    next: u64,
    session: Option<String>,
}

impl Cdp {
    fn connect(ws_url: &str) -> Result<Cdp, Box<dyn std::error::Error>> {
        let rest = ws_url.strip_prefix("ws://").ok_or("not a ws:// URL")?;
        let host = &rest[..rest.find('/').ok_or("no path in the DevTools URL")?];
        let stream = TcpStream::connect(host)?;
        let (ws, _) = tungstenite::client(ws_url, stream)?;
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(50)))?;
        Ok(Cdp {
            ws,
            next: 1,
            session: None,
        })
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, Box<dyn std::error::Error>> {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string()))?;
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            match self.ws.read() {
                Ok(Message::Text(text)) => {
                    let v: Value = serde_json::from_str(&text)?;
                    if v["id"] == id {
                        if let Some(e) = v.get("error") {
                            return Err(format!("{method}: {e}").into());
                        }
                        return Ok(v["result"].clone());
                    }
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(format!("no answer to {method} within 60 s").into())
    }

    fn eval(&mut self, expression: &str) -> Result<Value, Box<dyn std::error::Error>> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        )?;
        Ok(r["result"]["value"].clone())
    }
}

fn one_load(url: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let profile = tempfile::tempdir()?;
    let mut child = Command::new("/usr/bin/chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-extensions",
            "--no-first-run",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("ws://") {
                let _ = tx.send(line[at..].trim().to_owned());
            }
        }
    });
    let result = (|| -> Result<Value, Box<dyn std::error::Error>> {
        let ws_url = rx.recv_timeout(Duration::from_secs(30))?;
        let mut cdp = Cdp::connect(&ws_url)?;
        let target = cdp.call("Target.createTarget", json!({"url": "about:blank"}))?;
        let attached = cdp.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )?;
        cdp.session = attached["sessionId"].as_str().map(str::to_owned);
        cdp.call("Page.enable", json!({}))?;
        let started = Instant::now();
        cdp.call("Page.navigate", json!({"url": url}))?;
        let end = started + Duration::from_secs(120);
        loop {
            let status = cdp.eval("(document.body && document.body.dataset.status) || 'null'")?;
            let status: Value = serde_json::from_str(status.as_str().unwrap_or("null"))?;
            if status["first_paint_ms"].is_number() {
                let fcp = cdp.eval(
                    "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime",
                )?;
                return Ok(json!({
                    "first_meaningful_paint_ms": status["first_paint_ms"],
                    "first_contentful_paint_ms": fcp,
                    "charts": status["charts"],
                    "panels_drawn_at_ms": status["panel_ms"],
                    "errors": status["errors"],
                    "csp": status["csp"],
                    "wall_ms_from_navigate": started.elapsed().as_millis() as u64,
                }));
            }
            if Instant::now() > end {
                return Err(format!("no first paint within 120 s: {status}").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: first_paint URL [RUNS]")?;
    let runs: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    for _ in 0..runs {
        println!("{}", one_load(&url)?);
    }
    Ok(())
}
