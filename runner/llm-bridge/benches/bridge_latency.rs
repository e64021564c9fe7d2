//! The bridge's cost: added latency per call (direct to the scripted upstream vs through the
//! bridge's unix socket vs through the in-container path, relay + socket), and throughput with
//! 32 concurrent streaming calls. Run with `bench/llm-bridge.sh` (or
//! `cargo bench -p llm-bridge --bench bridge_latency`).
//!
//! Everything runs on this machine: the upstream, the bridge and the clients share one tokio
//! runtime, and the relay is a separate process, so the figures include their competition for
//! the cores. Calls are bounded in number; the benchmark stops by itself.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use llm_bridge::TrialGrant;
use serde_json::json;
use support::upstream::ScriptedUpstream;
use support::{ANTHROPIC_KEY, OPENAI_KEY};

const SEQUENTIAL_CALLS: usize = 400;
const WARMUP_CALLS: usize = 30;
const CONCURRENT: usize = 32;
const CALLS_PER_TASK: usize = 25;

#[derive(Clone)]
struct Path {
    name: &'static str,
    client: reqwest::Client,
    url: String,
    key: String,
}

async fn one_call(path: &Path, stream: bool) -> Duration {
    let body = json!({"model": "gpt-scripted", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let started = Instant::now();
    let mut response = path
        .client
        .post(&path.url)
        .bearer_auth(&path.key)
        .json(&body)
        .send()
        .await
        .expect("the call");
    assert!(
        response.status().is_success(),
        "{}: {}",
        path.name,
        response.status()
    );
    while response.chunk().await.expect("the body").is_some() {}
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn sequential(path: &Path, stream: bool) -> (Duration, Duration, Duration) {
    for _ in 0..WARMUP_CALLS {
        one_call(path, stream).await;
    }
    let mut times = Vec::with_capacity(SEQUENTIAL_CALLS);
    for _ in 0..SEQUENTIAL_CALLS {
        times.push(one_call(path, stream).await);
    }
    times.sort();
    (
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99),
    )
}

async fn concurrent(path: &Path) -> (f64, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move {
                let mut times = Vec::new();
                for _ in 0..CALLS_PER_TASK {
                    times.push(one_call(&path, true).await);
                }
                times
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    let wall = started.elapsed();
    times.sort();
    (
        times.len() as f64 / wall.as_secs_f64(),
        percentile(&times, 0.5),
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let upstream = ScriptedUpstream::start(OPENAI_KEY, ANTHROPIC_KEY).await;
        let dir = tempfile::tempdir().unwrap();
        let bridge = support::bridge_for(&upstream, dir.path());
        let trial = bridge
            .start_trial(TrialGrant::new("bench", vec!["openai/gpt-scripted".into()], dir.path().join("bench")))
            .await
            .unwrap();

        // The in-container path, on the host: the relay process on a loopback port.
        let relay_path = dir.path().join("bridge-relay");
        llm_bridge::relay::write_relay(&relay_path).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut relay = std::process::Command::new(&relay_path)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--socket"])
            .arg(trial.socket_path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let waited = std::process::Command::new(&relay_path)
            .args(["wait", "--addr", &format!("127.0.0.1:{port}"), "--timeout-ms", "5000"])
            .status()
            .unwrap();
        assert!(waited.success());

        let paths = [
            Path {
                name: "direct to upstream",
                client: reqwest::Client::new(),
                url: format!("http://{}/v1/chat/completions", upstream.addr),
                key: OPENAI_KEY.into(),
            },
            Path {
                name: "bridge (unix socket)",
                client: support::socket_client(trial.socket_path()),
                url: "http://bridge/v1/chat/completions".into(),
                key: trial.token().into(),
            },
            Path {
                name: "relay + bridge",
                client: reqwest::Client::new(),
                url: format!("http://127.0.0.1:{port}/v1/chat/completions"),
                key: trial.token().into(),
            },
        ];

        println!("llm-bridge benchmark: {SEQUENTIAL_CALLS} sequential calls per path after {WARMUP_CALLS} warm-up calls;");
        println!("throughput: {CONCURRENT} concurrent streaming clients x {CALLS_PER_TASK} calls each\n");
        let mut medians = Vec::new();
        for stream in [false, true] {
            println!("{} calls, per-call latency (ms):", if stream { "streaming" } else { "non-streaming" });
            println!("  {:<22} {:>8} {:>8} {:>8}", "path", "p50", "p90", "p99");
            for path in &paths {
                let (p50, p90, p99) = sequential(path, stream).await;
                println!("  {:<22} {:>8.3} {:>8.3} {:>8.3}", path.name, ms(p50), ms(p90), ms(p99));
                medians.push((stream, path.name, p50));
            }
            let direct = medians.iter().find(|(s, n, _)| *s == stream && *n == paths[0].name).unwrap().2;
            for (s, name, p50) in &medians {
                if *s == stream && *name != paths[0].name {
                    println!("  added by {name}: {:.3} ms at p50", ms(*p50) - ms(direct));
                }
            }
            println!();
        }
        println!("{CONCURRENT} concurrent streaming calls:");
        println!("  {:<22} {:>10} {:>14}", "path", "calls/s", "p50 call (ms)");
        for path in &paths {
            let (rate, p50) = concurrent(path).await;
            println!("  {:<22} {:>10.0} {:>14.3}", path.name, rate, ms(p50));
        }

        relay.kill().unwrap();
        relay.wait().unwrap();
        let usage = trial.close().await.unwrap();
        println!(
            "\nmetered through the bridge: {} calls, {} input + {} output tokens, ${:.6}",
            usage.n_calls, usage.n_input_tokens, usage.n_output_tokens, usage.cost_usd
        );
    });
}
