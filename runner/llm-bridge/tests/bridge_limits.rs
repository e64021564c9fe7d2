//! The bridge's limits over its real unix socket, against upstreams on 127.0.0.1: budgets held
//! under concurrency and stream aborts, request fields and server tools allow-listed, dollar
//! budgets that need prices, the agent phase (pause, resume, the in-band end of a turn), and
//! the bound on what a trial's record may take.
//!
//! The concurrency and abort tests use a gated upstream of their own: it answers nothing until
//! the test opens the gate, so every call is in flight at once, deterministically (the waits
//! are on events, never on the clock).

mod support;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing;
use bytes::Bytes;
use llm_bridge::{
    ApiKind, Bridge, BridgeConfig, Budget, KeySource, ModelKeyError, ProviderConfig, TrialBridge,
    TrialGrant,
};
use serde_json::{Value, json};
use support::upstream::ScriptedUpstream;
use support::{ANTHROPIC_KEY, OPENAI_KEY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// Usage every gated answer reports.
const INPUT: u64 = 100;
const OUTPUT: u64 = 50;

/// An upstream that counts arrivals and holds every answer until the gate opens.
#[derive(Clone)]
struct Gated {
    arrivals: watch::Sender<usize>,
    gate: watch::Receiver<bool>,
}

async fn gated_chat(State(g): State<Gated>) -> Response {
    g.arrivals.send_modify(|n| *n += 1);
    let mut gate = g.gate.clone();
    let _ = gate.wait_for(|open| *open).await;
    let body = json!({"id": "c", "model": "gpt-gated", "choices": [],
        "usage": {"prompt_tokens": INPUT, "completion_tokens": OUTPUT}});
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// How many 16 KiB text deltas the gated Anthropic stream sends before its final usage.
const GATED_DELTAS: usize = 256;

/// An Anthropic stream: `message_start` (the input count) at once, the rest after the gate.
async fn gated_messages(State(g): State<Gated>) -> Response {
    g.arrivals.send_modify(|n| *n += 1);
    let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-gated\",\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}}\n\n";
    let delta = format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n",
        "x".repeat(16 * 1024)
    );
    let end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let gate = g.gate.clone();
    // After the gate: GATED_DELTAS text deltas (far more than any socket buffer holds), so a
    // bridge whose agent has hung up meets the closed socket long before the final usage.
    let stream = futures_util::stream::unfold(0, move |step| {
        let mut gate = gate.clone();
        let delta = delta.clone();
        async move {
            let chunk = match step {
                0 => start.to_string(),
                1 => {
                    let _ = gate.wait_for(|open| *open).await;
                    delta
                }
                n if n <= GATED_DELTAS => delta,
                n if n == GATED_DELTAS + 1 => end.to_string(),
                _ => return None,
            };
            Some((Ok::<Bytes, std::io::Error>(Bytes::from(chunk)), step + 1))
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

struct GatedUpstream {
    base: String,
    arrivals: watch::Receiver<usize>,
    gate: watch::Sender<bool>,
}

async fn gated_upstream() -> GatedUpstream {
    let (arrivals_tx, arrivals) = watch::channel(0);
    let (gate, gate_rx) = watch::channel(false);
    let state = Gated {
        arrivals: arrivals_tx,
        gate: gate_rx,
    };
    let router = Router::new()
        .route("/v1/chat/completions", routing::post(gated_chat))
        .route("/v1/messages", routing::post(gated_messages))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    GatedUpstream {
        base: format!("http://{addr}"),
        arrivals,
        gate,
    }
}

/// A bridge in front of a [`gated_upstream`] for both providers, recording under a temp dir.
async fn gated_bridge() -> (GatedUpstream, Bridge, tempfile::TempDir) {
    let upstream = gated_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let (openai_key, anthropic_key) = support::key_files(dir.path());
    let bridge = Bridge::new(BridgeConfig::new(vec![
        ProviderConfig {
            name: "openai".into(),
            api: ApiKind::OpenAi,
            base_url: format!("{}/v1", upstream.base),
            key: KeySource::File(openai_key),
        },
        ProviderConfig {
            name: "anthropic".into(),
            api: ApiKind::Anthropic,
            base_url: upstream.base.clone(),
            key: KeySource::File(anthropic_key),
        },
    ]))
    .unwrap();
    (upstream, bridge, dir)
}

async fn start(
    bridge: &Bridge,
    dir: &std::path::Path,
    models: &[&str],
    budget: Budget,
) -> TrialBridge {
    let mut grant = TrialGrant::new(
        "t",
        models.iter().map(|m| m.to_string()).collect(),
        dir.join("t"),
    );
    grant.budget = budget;
    bridge.start_trial(grant).await.unwrap()
}

async fn post(trial: &TrialBridge, path: &str, body: &Value) -> reqwest::Response {
    support::socket_client(trial.socket_path())
        .post(format!("http://bridge{path}"))
        .bearer_auth(trial.token())
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

fn records(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("t/llm/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_at_the_budget_edge_stay_within_one_call_of_it() {
    let (mut upstream, bridge, dir) = gated_bridge().await;
    const BUDGET: u64 = 1_000;
    let budget = Budget {
        max_tokens: Some(BUDGET),
        max_cost_usd: None,
    };
    let trial = Arc::new(start(&bridge, dir.path(), &["openai/gpt-gated"], budget).await);
    // About 100 bytes of request and 50 output tokens: each call holds about what it spends.
    let body = json!({"model": "gpt-gated", "max_tokens": OUTPUT,
        "messages": [{"role": "user", "content": "x".repeat(20)}]});
    let (refused_tx, mut refused) = watch::channel(0usize);
    let mut calls = Vec::new();
    for _ in 0..32 {
        let trial = trial.clone();
        let body = body.clone();
        let refused_tx = refused_tx.clone();
        calls.push(tokio::spawn(async move {
            let response = post(&trial, "/v1/chat/completions", &body).await;
            let status = response.status().as_u16();
            if status != 200 {
                refused_tx.send_modify(|n| *n += 1);
            }
            let _ = response.bytes().await;
            status
        }));
    }
    // Every call is either waiting at the upstream or refused: only then open the gate.
    loop {
        let (arrived, refused_now) = (*upstream.arrivals.borrow(), *refused.borrow());
        if arrived + refused_now == 32 {
            break;
        }
        tokio::select! {
            _ = upstream.arrivals.changed() => {}
            _ = refused.changed() => {}
        }
    }
    upstream.gate.send(true).unwrap();
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    let forwarded = statuses.iter().filter(|s| **s == 200).count() as u64;
    let refused = statuses.iter().filter(|s| **s == 429).count() as u64;
    assert_eq!(forwarded + refused, 32, "{statuses:?}");
    assert!(forwarded >= 1 && refused >= 1, "{statuses:?}");
    let trial = Arc::into_inner(trial).unwrap();
    let usage = trial.close().await.unwrap();
    let total = usage.n_input_tokens + usage.n_output_tokens;
    assert_eq!(total, forwarded * (INPUT + OUTPUT));
    assert!(
        total <= BUDGET + INPUT + OUTPUT,
        "{forwarded} calls spent {total} tokens of a {BUDGET}-token budget"
    );
    assert_eq!(usage.n_refused_calls, refused);
    assert!(
        usage
            .budget_exhausted
            .as_deref()
            .is_some_and(|r| r.contains("token budget")),
        "{usage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_stream_is_charged_its_reported_input_and_its_max_tokens() {
    let (mut upstream, bridge, dir) = gated_bridge().await;
    let trial = start(
        &bridge,
        dir.path(),
        &["anthropic/claude-gated"],
        Budget::UNLIMITED,
    )
    .await;
    let body = json!({"model": "claude-gated", "max_tokens": 900, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    // A raw socket rather than reqwest: dropping a reqwest response closes its connection
    // later, on the client's own task, so the rest of the stream could still be read (stop
    // 33's CI saw outcome "ok"). Dropping this socket closes it before the gate opens.
    let mut agent = tokio::net::UnixStream::connect(trial.socket_path())
        .await
        .unwrap();
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: bridge\r\nauthorization: Bearer {}\r\n\
         anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        trial.token(),
        body.len()
    );
    agent.write_all(request.as_bytes()).await.unwrap();
    // The agent reads message_start, then hangs up before the final usage event.
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("message_start") {
        let mut buf = [0u8; 4096];
        let n = agent.read(&mut buf).await.unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    drop(agent);
    upstream.arrivals.wait_for(|n| *n == 1).await.unwrap();
    // The rest of the stream then meets a closed connection.
    upstream.gate.send(true).unwrap();
    let usage = trial.close().await.unwrap();
    let records = records(dir.path());
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert!(
        ["client_disconnected", "aborted"].contains(&record["outcome"].as_str().unwrap()),
        "{record}"
    );
    assert_eq!(record["charged"]["n_input_tokens"], 40, "{record}");
    assert_eq!(record["charged"]["n_output_tokens"], 900, "{record}");
    assert_eq!((usage.n_input_tokens, usage.n_output_tokens), (40, 900));
    assert_eq!(usage.n_calls_charged_estimate, 1);
}

async fn scripted_bridge(
    tweak: impl FnOnce(&mut BridgeConfig),
) -> (ScriptedUpstream, Bridge, tempfile::TempDir) {
    let upstream = ScriptedUpstream::start(OPENAI_KEY, ANTHROPIC_KEY).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config_for(&upstream, dir.path());
    tweak(&mut config);
    let bridge = Bridge::new(config).unwrap();
    (upstream, bridge, dir)
}

const GPT: &str = "openai/gpt-scripted";
const CLAUDE: &str = "anthropic/claude-scripted";

#[tokio::test]
async fn undeclared_models_in_fields_and_network_tools_are_refused_before_the_provider() {
    let (upstream, bridge, dir) = scripted_bridge(|_| {}).await;
    let trial = start(&bridge, dir.path(), &[GPT, CLAUDE], Budget::UNLIMITED).await;
    let messages = json!([{"role": "user", "content": "hi"}]);
    let refused = [
        (
            "/v1/chat/completions",
            json!({"model": "gpt-scripted", "messages": messages, "models": ["openai/gpt-undeclared"]}),
            "\"models\"",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-scripted", "messages": messages, "provider": {"order": ["elsewhere"]}}),
            "\"provider\"",
        ),
        (
            "/v1/responses",
            json!({"model": "gpt-scripted", "input": "hi", "tools": [{"type": "web_search"}]}),
            "\"web_search\"",
        ),
        (
            "/v1/messages",
            json!({"model": "claude-scripted", "max_tokens": 10, "messages": messages,
                "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}),
            "web_fetch_20250910",
        ),
        (
            "/v1/messages",
            json!({"model": "claude-scripted", "max_tokens": 10, "messages": messages,
                "mcp_servers": [{"type": "url", "url": "http://198.51.100.1/mcp", "name": "m"}]}),
            "\"mcp_servers\"",
        ),
    ];
    for (path, body, named) in &refused {
        let response = post(&trial, path, body).await;
        assert_eq!(response.status(), 403, "{path} {body}");
        let answer: Value = response.json().await.unwrap();
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{answer}");
    }
    // A function tool the agent runs itself passes.
    let tools = json!({"model": "gpt-scripted", "messages": messages,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]});
    assert_eq!(
        post(&trial, "/v1/chat/completions", &tools).await.status(),
        200
    );
    assert_eq!(
        upstream.seen().len(),
        1,
        "a refused body reached the provider"
    );
    let usage = trial.close().await.unwrap();
    assert_eq!(usage.n_refused_calls, refused.len() as u64);
    let records = records(dir.path());
    assert!(
        records
            .iter()
            .filter(|r| r["outcome"] == "refused")
            .all(|r| r["refusal"] == "field_not_allowed" && r["request_body"].is_null())
    );

    // A job that allows network tools forwards them.
    let (upstream, bridge, dir) = scripted_bridge(|c| c.allow_network_tools = true).await;
    let trial = start(&bridge, dir.path(), &[GPT], Budget::UNLIMITED).await;
    let (_, body, _) = &refused[2];
    assert_eq!(post(&trial, "/v1/responses", body).await.status(), 200);
    // Routing fields stay refused either way.
    let (_, body, _) = &refused[0];
    assert_eq!(
        post(&trial, "/v1/chat/completions", body).await.status(),
        403
    );
    assert_eq!(upstream.seen().len(), 1);
    trial.close().await.unwrap();
}

#[tokio::test]
async fn a_dollar_budget_over_an_unpriced_model_is_refused_before_any_trial() {
    let (_upstream, bridge, dir) = scripted_bridge(|c| {
        c.job_budget = Budget {
            max_tokens: None,
            max_cost_usd: Some(5.0),
        }
    })
    .await;
    let unpriced = vec![GPT.to_string(), "openai/gpt-unpriced".to_string()];
    match bridge.check_models(&unpriced) {
        Err(ModelKeyError::Unpriced { model, scope }) => {
            assert_eq!((model.as_str(), scope), ("openai/gpt-unpriced", "job"));
        }
        other => panic!("{other:?}"),
    }
    let message = ModelKeyError::Unpriced {
        model: "openai/gpt-unpriced".into(),
        scope: "job",
    }
    .to_string();
    assert!(message.contains("no price"), "{message}");
    assert!(bridge.check_models(&[GPT.to_string()]).is_ok());

    // A trial's own dollar budget too; a token budget counts every model.
    let (_upstream, bridge, dir2) = scripted_bridge(|_| {}).await;
    let mut grant = TrialGrant::new("t", unpriced.clone(), dir2.path().join("t"));
    grant.budget.max_cost_usd = Some(1.0);
    let error = bridge.start_trial(grant).await.unwrap_err().to_string();
    assert!(
        error.contains("gpt-unpriced") && error.contains("trial dollar budget"),
        "{error}"
    );
    let tokens = Budget {
        max_tokens: Some(10),
        max_cost_usd: None,
    };
    let trial = start(&bridge, dir2.path(), &["openai/gpt-unpriced"], tokens).await;
    let chat = json!({"model": "gpt-unpriced", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        post(&trial, "/v1/chat/completions", &chat).await.status(),
        200
    );
    // The unpriced call's tokens (21 + 7) spent the 10-token budget.
    assert_eq!(
        post(&trial, "/v1/chat/completions", &chat).await.status(),
        429
    );
    trial.close().await.unwrap();
    drop(dir);
}

#[tokio::test]
async fn a_paused_trial_forwards_nothing_and_the_agent_can_end_its_own_turn() {
    let (upstream, bridge, dir) = scripted_bridge(|_| {}).await;
    let trial = start(&bridge, dir.path(), &[GPT], Budget::UNLIMITED).await;
    let chat = json!({"model": "gpt-scripted", "messages": [{"role": "user", "content": "hi"}]});
    trial.pause();
    let response = post(&trial, "/v1/chat/completions", &chat).await;
    assert_eq!(response.status(), 401);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("not in its agent phase")
    );
    assert!(upstream.seen().is_empty());
    trial.resume();
    assert_eq!(
        post(&trial, "/v1/chat/completions", &chat).await.status(),
        200
    );

    // The in-band end of the turn needs the trial's token, and then pauses the trial.
    let client = support::socket_client(trial.socket_path());
    let forged = client
        .post("http://bridge/runner/end-turn")
        .bearer_auth("runner-trial-forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert_eq!(
        post(&trial, "/v1/chat/completions", &chat).await.status(),
        200
    );
    let ended = client
        .post("http://bridge/runner/end-turn")
        .bearer_auth(trial.token())
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    assert_eq!(
        post(&trial, "/v1/chat/completions", &chat).await.status(),
        401
    );
    assert_eq!(upstream.seen().len(), 2);
    let command = trial.end_turn_command();
    assert!(
        command.contains("end-turn") && command.contains(trial.token()),
        "{command}"
    );
    trial.close().await.unwrap();
}

#[tokio::test]
async fn refused_calls_leave_no_bodies_and_the_record_stops_at_its_cap() {
    const CAP: u64 = 8 * 1024;
    let (upstream, bridge, dir) = scripted_bridge(|c| c.max_recorded_bytes_per_trial = CAP).await;
    let trial = start(&bridge, dir.path(), &[GPT], Budget::UNLIMITED).await;
    // A large body for an undeclared model: refused, and not written anywhere.
    let big = json!({"model": "gpt-undeclared", "messages": [{"role": "user", "content": "y".repeat(1 << 20)}]});
    assert_eq!(
        post(&trial, "/v1/chat/completions", &big).await.status(),
        403
    );
    let client = support::socket_client(trial.socket_path());
    for _ in 0..100 {
        let response = client
            .post("http://bridge/v1/chat/completions")
            .bearer_auth("runner-trial-wrong")
            .json(&json!({"model": "gpt-scripted"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
    }
    let usage = trial.close().await.unwrap();
    assert_eq!(usage.n_refused_calls, 101);
    assert!(usage.n_calls_not_recorded > 0, "{usage:?}");
    let llm = dir.path().join("t/llm");
    let mut size = std::fs::metadata(llm.join("calls.jsonl")).unwrap().len();
    for entry in std::fs::read_dir(llm.join("calls")).unwrap() {
        size += entry.unwrap().metadata().unwrap().len();
    }
    // One line past the cap at most (the line that crossed it).
    assert!(size < CAP + 2048, "the record took {size} bytes");
    assert_eq!(
        records(dir.path()).len() as u64 + usage.n_calls_not_recorded,
        101
    );
    assert!(upstream.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_ends_the_turn_in_band_and_returns_once_the_bridge_has_paused() {
    let (upstream, bridge, dir) = scripted_bridge(|_| {}).await;
    let trial = start(&bridge, dir.path(), &[GPT], Budget::UNLIMITED).await;
    let relay = dir.path().join("bridge-relay");
    llm_bridge::relay::write_relay(&relay).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = tokio::process::Command::new(&relay)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--socket",
        ])
        .arg(trial.socket_path())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let waited = tokio::process::Command::new(&relay)
        .args(["wait", "--addr", &addr, "--timeout-ms", "10000"])
        .status()
        .await
        .unwrap();
    assert!(waited.success());
    let chat = json!({"model": "gpt-scripted", "messages": [{"role": "user", "content": "hi"}]});
    let through_relay = || {
        reqwest::Client::new()
            .post(format!("http://{addr}/v1/chat/completions"))
            .bearer_auth(trial.token())
            .json(&chat)
            .send()
    };
    assert_eq!(through_relay().await.unwrap().status(), 200);
    let wrong = tokio::process::Command::new(&relay)
        .args(["end-turn", "--addr", &addr, "--token", "runner-trial-wrong"])
        .output()
        .await
        .unwrap();
    assert!(!wrong.status.success());
    assert_eq!(through_relay().await.unwrap().status(), 200);
    let ended = tokio::process::Command::new(&relay)
        .args(["end-turn", "--addr", &addr, "--token", trial.token()])
        .output()
        .await
        .unwrap();
    assert!(
        ended.status.success(),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    // Paused by the time end-turn returned: nothing more reaches the provider.
    assert_eq!(through_relay().await.unwrap().status(), 401);
    assert_eq!(upstream.seen().len(), 2);
    serve.kill().await.unwrap();
    trial.close().await.unwrap();
}
