//! `--metrics-addr`: the agent's Prometheus metrics (`GET /metrics`) and its readiness
//! (`GET /readyz`: 200 once ready, 503 with what it waits for) over HTTP/1, for the node's
//! Prometheus and the kubelet's readiness probe. Served by hyper's HTTP/1 server (in the graph
//! already as kube's client) on a current-thread runtime of its own thread, so that a busy API
//! side never delays a probe. Anything else is 404; any other method 405.

use crate::error::InstallError;
use crate::metrics::Metrics;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::time::Duration;

/// The OpenMetrics text format's content type (what prometheus-client writes).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a port that cannot be bound waits before the next try, at first and at most.
const BIND_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// Serves on a thread of its own, binding `addr` there. A port that cannot be bound (taken by
/// another exporter — 9464 is also OpenTelemetry's Prometheus exporter port — or not yet
/// available) never stops the installer: braid's conflist matters more to the node than its
/// metrics, and a node without it starts pods on the primary alone. The bind is tried again
/// with backoff (0.5 s doubling to 30 s), each new reason logged once; until it succeeds the
/// kubelet's readiness probe finds nothing listening, and the log says why.
pub fn start(addr: SocketAddr, metrics: Metrics) -> Result<(), InstallError> {
    let err = |source| InstallError::Metrics { addr, source };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(err)?;
    let first = bind(addr);
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            let mut next = first;
            let mut delay = BIND_RETRY.0;
            let mut said = None;
            let listener = loop {
                match next {
                    Ok(l) => break l,
                    Err(e) => {
                        crate::log_changed(
                            &mut said,
                            format!("--metrics-addr {addr}: cannot listen ({e}); installing anyway, trying again with backoff"),
                        );
                        std::thread::sleep(delay);
                        delay = (delay * 2).min(BIND_RETRY.1);
                        next = bind(addr);
                    }
                }
            };
            crate::log(&format!("serving /metrics and /readyz on http://{addr}"));
            runtime.block_on(serve(listener, metrics))
        })
        .map_err(err)?;
    Ok(())
}

fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

async fn serve(listener: std::net::TcpListener, metrics: Metrics) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return crate::log(&format!("--metrics-addr: {e}; not serving metrics")),
    };
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: try again shortly.
                crate::log(&format!("--metrics-addr: accept: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let m = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let answer = respond(&m, &req);
                async move { Ok::<_, std::convert::Infallible>(answer) }
            });
            // A client that sends no request head within 10 s is dropped.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to one request.
pub fn respond<B>(metrics: &Metrics, req: &Request<B>) -> Response<Full<Bytes>> {
    let text = |code: StatusCode, body: String, content_type: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = code;
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into(), PLAIN);
    }
    match req.uri().path() {
        "/metrics" => text(StatusCode::OK, metrics.encode(), OPENMETRICS),
        "/readyz" => match metrics.ready() {
            Ok(()) => text(StatusCode::OK, "ok\n".into(), PLAIN),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"), PLAIN),
        },
        _ => text(StatusCode::NOT_FOUND, "/metrics, /readyz\n".into(), PLAIN),
    }
}
