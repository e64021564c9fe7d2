//! The bridge over its real unix socket with a real HTTP client, against the scripted upstream
//! on 127.0.0.1: forwarding, streaming, metering, records, policy, budgets, revocation.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use llm_bridge::{Bridge, BridgeConfig, Budget, TrialBridge, TrialGrant};
use serde_json::{Value, json};
use support::upstream::{self, ScriptedUpstream};
use support::{ANTHROPIC_KEY, OPENAI_KEY};

const GPT: &str = "openai/gpt-scripted";
const CLAUDE: &str = "anthropic/claude-scripted";
const CHAT_ROUTE: &str = "/v1/chat/completions";

struct Fixture {
    upstream: ScriptedUpstream,
    bridge: Bridge,
    dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    Fixture::with(|_| {}).await
}

impl Fixture {
    /// A bridge over a fresh scripted upstream, its config changed by `tweak` first.
    async fn with(tweak: impl FnOnce(&mut BridgeConfig)) -> Fixture {
        Fixture::scripted(upstream::Script::new(), tweak).await
    }

    /// A bridge over a fresh scripted upstream answering from `script`.
    async fn scripted(script: upstream::Script, tweak: impl FnOnce(&mut BridgeConfig)) -> Fixture {
        let upstream = ScriptedUpstream::start_with(OPENAI_KEY, ANTHROPIC_KEY, script).await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = support::config_for(&upstream, dir.path());
        tweak(&mut config);
        let bridge = Bridge::new(config).unwrap();
        Fixture {
            upstream,
            bridge,
            dir,
        }
    }

    async fn trial(&self, name: &str, models: &[&str], budget: Budget) -> TrialBridge {
        let mut grant = TrialGrant::new(
            name,
            models.iter().map(|m| m.to_string()).collect(),
            self.dir.path().join(name),
        );
        grant.budget = budget;
        self.bridge.start_trial(grant).await.unwrap()
    }

    /// Why the bridge refuses to start a trial that may call `models`.
    async fn refused_grant(&self, name: &str, models: &[&str]) -> String {
        let models = models.iter().map(|m| m.to_string()).collect();
        let grant = TrialGrant::new(name, models, self.dir.path().join(name));
        self.bridge
            .start_trial(grant)
            .await
            .unwrap_err()
            .to_string()
    }
}

fn calls(trial_dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(trial_dir.join("llm/calls.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn post(trial: &TrialBridge, path: &str, token: &str, body: Value) -> reqwest::Response {
    support::socket_client(trial.socket_path())
        .post(format!("http://bridge{path}"))
        .bearer_auth(token)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn chat(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}

/// One chat completion call with the trial's own token.
async fn chat_call(
    trial: &TrialBridge,
    model: &str,
    text: &str,
    stream: bool,
) -> reqwest::Response {
    post(trial, CHAT_ROUTE, trial.token(), chat(model, text, stream)).await
}

/// Posts `body` with the trial's own token and returns the JSON answer.
async fn call_json(trial: &TrialBridge, path: &str, body: Value) -> Value {
    serde_json::from_str(&call_text(trial, path, body).await).unwrap()
}

/// Posts `body` with the trial's own token and returns the answer as text (a stream's events).
async fn call_text(trial: &TrialBridge, path: &str, body: Value) -> String {
    post(trial, path, trial.token(), body)
        .await
        .text()
        .await
        .unwrap()
}

/// Sends a request built by hand and returns the JSON answer.
async fn send_for_json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Asserts the response's status and returns its JSON body.
async fn json_with_status(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    response.json().await.unwrap()
}

fn assert_no_secrets_under(dir: &Path, secrets: &[&str]) {
    for entry in walk(dir) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in secrets {
            assert!(!text.contains(secret), "{} holds a secret", entry.display());
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn all_three_endpoints_stream_and_not_and_usage_is_metered() {
    let f = fixture().await;
    let trial = f.trial("t-all", &[GPT, CLAUDE], Budget::UNLIMITED).await;
    let token = trial.token().to_owned();

    let whole: Value = call_json(&trial, CHAT_ROUTE, chat("gpt-scripted", "hi", false)).await;
    assert_eq!(whole["choices"][0]["message"]["content"], upstream::REPLY);
    let streamed = call_text(&trial, CHAT_ROUTE, chat("gpt-scripted", "hi", true)).await;
    assert!(
        streamed.contains("\"usage\"") && streamed.ends_with("data: [DONE]\n\n"),
        "{streamed}"
    );

    let responses = json!({"model": "gpt-scripted", "input": "hi"});
    let whole: Value = call_json(&trial, "/v1/responses", responses.clone()).await;
    assert_eq!(whole["output"][0]["content"][0]["text"], upstream::REPLY);
    let mut streaming = responses;
    streaming["stream"] = json!(true);
    let streamed = call_text(&trial, "/v1/responses", streaming).await;
    assert!(streamed.contains("response.completed"));

    let messages = json!({"model": "claude-scripted", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
    let client = support::socket_client(trial.socket_path());
    let whole = send_for_json(
        client
            .post("http://bridge/v1/messages")
            .header("x-api-key", &token)
            .header("anthropic-version", "2023-06-01")
            .json(&messages),
    )
    .await;
    assert_eq!(whole["content"][0]["text"], upstream::REPLY);
    let mut streaming = messages;
    streaming["stream"] = json!(true);
    let streamed = call_text(&trial, "/v1/messages", streaming).await;
    assert!(streamed.contains("message_stop"));

    // The upstream saw the real keys, never the token, and a chat stream with usage turned on.
    let seen = f.upstream.seen();
    assert_eq!(seen.len(), 6);
    for request in &seen {
        let headers = format!("{:?}", request.headers);
        assert!(!headers.contains(&token), "the token reached the upstream");
        if request.path == "/v1/messages" {
            assert_eq!(request.headers["x-api-key"], ANTHROPIC_KEY);
        } else {
            assert_eq!(
                request.headers["authorization"],
                format!("Bearer {OPENAI_KEY}").as_str()
            );
        }
        assert_eq!(request.headers["accept-encoding"], "identity");
    }
    assert_eq!(seen[1].body["stream_options"]["include_usage"], true);

    let trial_dir = f.dir.path().join("t-all");
    let usage = trial.close().await.unwrap();
    let records = calls(&trial_dir);
    assert_eq!(records.len(), 6);
    let expected = [
        upstream::CHAT_USAGE,
        upstream::CHAT_USAGE,
        upstream::RESPONSES_USAGE,
        upstream::RESPONSES_USAGE,
        upstream::MESSAGES_USAGE,
        upstream::MESSAGES_USAGE,
    ];
    let mut by_seq = records.clone();
    by_seq.sort_by_key(|r| r["seq"].as_u64());
    for (record, u) in by_seq.iter().zip(expected) {
        let (input, cached, writes, output) = (u.input, u.cached, u.cache_write, u.output);
        assert_eq!(record["outcome"], "ok", "{record}");
        assert_eq!(
            record["usage"],
            json!({"n_input_tokens": input, "n_cache_tokens": cached, "n_cache_write_tokens": writes, "n_output_tokens": output}),
            "{record}"
        );
        assert_eq!(record["price_known"], true);
        assert!(record["cost_usd"].as_f64().unwrap() > 0.0);
        let request_file = trial_dir
            .join("llm")
            .join(record["request_body"].as_str().unwrap());
        let response_file = trial_dir
            .join("llm")
            .join(record["response_body"].as_str().unwrap());
        assert!(std::fs::metadata(&request_file).unwrap().len() > 0);
        assert_eq!(
            std::fs::metadata(&response_file).unwrap().len(),
            record["response_bytes"].as_u64().unwrap()
        );
    }
    assert_eq!(by_seq[1]["stream"], true);
    assert!(
        by_seq[1]["response_body"]
            .as_str()
            .unwrap()
            .ends_with(".sse")
    );
    let sum = |i: usize| {
        expected
            .iter()
            .map(|u| [u.input, u.cached, u.cache_write, u.output][i])
            .sum::<u64>()
    };
    assert_eq!(usage.n_input_tokens, sum(0));
    assert_eq!(usage.n_cache_tokens, sum(1));
    assert_eq!(usage.n_output_tokens, sum(3));
    assert_eq!(usage.n_calls, 6);
    assert_eq!(
        usage.models_called.iter().collect::<Vec<_>>(),
        [CLAUDE, GPT]
    );
    // Cost from the test price table: chat (21 in, 5 cached, 7 out) at 2/0.5/8 per Mtok, ...
    let chat_cost = (16.0 * 2.0 + 5.0 * 0.5 + 7.0 * 8.0) / 1e6;
    let responses_cost = (17.0 * 2.0 + 4.0 * 8.0) / 1e6;
    let messages_cost = (13.0 * 3.0 + 3.0 * 0.3 + 2.0 * 3.75 + 6.0 * 15.0) / 1e6;
    assert!(
        (usage.cost_usd - 2.0 * (chat_cost + responses_cost + messages_cost)).abs() < 1e-12,
        "{}",
        usage.cost_usd
    );
    let written: llm_bridge::TrialUsage =
        serde_json::from_slice(&std::fs::read(trial_dir.join("llm/usage.json")).unwrap()).unwrap();
    assert_eq!(written, usage);
    assert_eq!(
        f.bridge.job_usage().totals.n_input_tokens,
        usage.n_input_tokens
    );
    assert_no_secrets_under(&trial_dir, &[OPENAI_KEY, ANTHROPIC_KEY, &token]);
}

#[tokio::test]
async fn streams_pass_through_as_they_arrive() {
    let f = fixture().await;
    let trial = f.trial("t-slow", &[GPT], Budget::UNLIMITED).await;
    let mut response = chat_call(&trial, "gpt-scripted", "HOLD_STREAM", true).await;
    // The upstream holds its stream after the first event until released: a bridge that
    // buffered would deliver nothing until then, so this waits on causality, not on a clock.
    let first = tokio::time::timeout(Duration::from_secs(30), response.chunk())
        .await
        .expect("the first event arrived while the upstream held the rest: the bridge buffered")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("chat.completion.chunk"));
    f.upstream.release_held_streams();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert!(
        String::from_utf8_lossy(&rest).contains("[DONE]"),
        "the rest of the stream followed the release"
    );
    trial.close().await.unwrap();
}

#[tokio::test]
async fn undeclared_models_are_refused_in_the_providers_shape() {
    let f = fixture().await;
    let trial = f.trial("t-policy", &[GPT], Budget::UNLIMITED).await;
    let response = chat_call(&trial, "gpt-4o", "hi", false).await;
    let body = json_with_status(response, 403).await;
    assert_eq!(body["error"]["code"], "model_not_allowed");
    assert_eq!(
        body["error"]["message"],
        "model 'gpt-4o' is not allowed in this trial; allowed models: openai/gpt-scripted"
    );
    // The declared OpenAI model is not served on the Anthropic route either.
    let response = post(
        &trial,
        "/v1/messages",
        trial.token(),
        json!({"model": "gpt-scripted", "max_tokens": 5, "messages": []}),
    )
    .await;
    let body = json_with_status(response, 403).await;
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "permission_error");
    assert!(
        f.upstream.seen().is_empty(),
        "a refused call reached the upstream"
    );

    let models = send_for_json(
        support::socket_client(trial.socket_path())
            .get("http://bridge/v1/models")
            .bearer_auth(trial.token()),
    )
    .await;
    assert_eq!(
        models["data"],
        json!([{"id": "gpt-scripted", "object": "model", "created": 0, "owned_by": "openai"}])
    );

    let dir = f.dir.path().join("t-policy");
    let usage = trial.close().await.unwrap();
    assert_eq!((usage.n_calls, usage.n_refused_calls), (0, 2));
    let records = calls(&dir);
    assert!(
        records
            .iter()
            .all(|r| r["outcome"] == "refused" && r["refusal"] == "model_not_allowed")
    );
}

#[tokio::test]
async fn tokens_are_per_trial_and_revoked_on_close() {
    let f = fixture().await;
    let a = f.trial("t-a", &[GPT], Budget::UNLIMITED).await;
    let b = f.trial("t-b", &[GPT], Budget::UNLIMITED).await;
    assert_ne!(a.token(), b.token());
    for (trial, token) in [
        (&a, b.token()),
        (&a, "sk-proj-notTheTokenAtAllxxxxxxxxxxxx"),
        (&a, ""),
    ] {
        let response = post(trial, CHAT_ROUTE, token, chat("gpt-scripted", "hi", false)).await;
        let body = json_with_status(response, 401).await;
        assert_eq!(body["error"]["type"], "invalid_api_key");
    }
    assert!(f.upstream.seen().is_empty());

    // The socket is private to the runner (and container root) and lives in its own directory.
    let mode = std::fs::metadata(a.socket_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::metadata(a.socket_dir())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o711
    );
    assert!(a.socket_dir().join("bridge-relay").is_file());
    assert!(a.socket_dir().starts_with(f.bridge.socket_root()));

    let socket = a.socket_path().to_owned();
    let token = a.token().to_owned();
    a.close().await.unwrap();
    assert!(!socket.exists(), "the socket outlived its trial");
    let after = support::socket_client(&socket)
        .post("http://bridge/v1/chat/completions")
        .bearer_auth(&token)
        .json(&chat("gpt-scripted", "hi", false))
        .send()
        .await;
    assert!(after.is_err(), "a closed trial still answered");
    // The other trial is unaffected.
    let ok = chat_call(&b, "gpt-scripted", "hi", false).await;
    assert_eq!(ok.status(), 200);
    b.close().await.unwrap();
}

/// The token is checked in one layer in front of the whole router: every route, the
/// fallback, and so any route added later, refuses a request without this trial's token
/// before a handler runs (a refused end-turn does not end the turn).
#[tokio::test]
async fn every_route_and_the_fallback_refuse_a_request_without_the_trials_token() {
    let f = fixture().await;
    let a = f.trial("t-a", &[GPT], Budget::UNLIMITED).await;
    let b = f.trial("t-b", &[GPT], Budget::UNLIMITED).await;
    let client = support::socket_client(a.socket_path());
    for (method, path) in [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
        ("POST", "/runner/end-turn"),
        ("GET", "/v1/models"),
        ("GET", "/v1/models/gpt-scripted"),
        ("GET", "/v1/files"),
        ("POST", "/admin/anything"),
    ] {
        for token in [b.token(), ""] {
            let request = match method {
                "GET" => client.get(format!("http://bridge{path}")),
                _ => client.post(format!("http://bridge{path}")).json(&chat(
                    "gpt-scripted",
                    "hi",
                    false,
                )),
            };
            let response = request.bearer_auth(token).send().await.unwrap();
            let body = json_with_status(response, 401).await;
            // Each refusal in the shape of its route's API (OpenAI's without a hint).
            let expected = match path {
                "/v1/messages" => "authentication_error",
                _ => "invalid_api_key",
            };
            assert_eq!(
                body["error"]["type"], expected,
                "{method} {path} with {token:?}"
            );
        }
    }
    assert!(f.upstream.seen().is_empty());
    // The refused model calls are the trial's refused calls (2 tokens × 3 endpoints), recorded
    // as such; the other routes make no call record.
    let refused = calls(&f.dir.path().join("t-a"));
    assert_eq!(refused.len(), 6, "{refused:#?}");
    assert!(
        refused.iter().all(|c| c["outcome"] == "refused"),
        "{refused:#?}"
    );
    // The right token passes the layer, and the refused end-turns did not end the turn.
    let listed = client
        .get("http://bridge/v1/models")
        .bearer_auth(a.token())
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert_eq!(
        chat_call(&a, "gpt-scripted", "hi", false).await.status(),
        200
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn a_spent_trial_budget_refuses_further_calls_and_says_why() {
    let f = fixture().await;
    // One chat call spends 28 tokens: the first two pass (0 and 28 < 50), the third is refused.
    let budget = Budget {
        max_tokens: Some(50),
        max_cost_usd: None,
    };
    let trial = f.trial("t-budget", &[GPT], budget).await;
    for _ in 0..2 {
        let response = chat_call(&trial, "gpt-scripted", "hi", true).await;
        assert_eq!(response.status(), 200);
        response.text().await.unwrap();
    }
    let refused = chat_call(&trial, "gpt-scripted", "hi", false).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["x-should-retry"], "false");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "insufficient_quota");
    let reason = "the trial 't-budget' token budget is spent: 56 of 50 tokens used";
    assert_eq!(body["error"]["message"], reason);
    let usage = trial.close().await.unwrap();
    assert_eq!(usage.budget_exhausted.as_deref(), Some(reason));
    assert_eq!((usage.n_calls, usage.n_refused_calls), (2, 1));
    assert_eq!(f.upstream.seen().len(), 2);
    assert!(
        !f.bridge.job_budget_exhausted(),
        "a trial budget is not the job's"
    );
}

#[tokio::test]
async fn a_spent_job_budget_stops_every_trial_and_the_scheduler() {
    // One Anthropic call costs $0.0001374; the job may spend $0.0002.
    let f = Fixture::with(|config| {
        config.job_budget = Budget {
            max_tokens: None,
            max_cost_usd: Some(0.0002),
        }
    })
    .await;
    let bridge = &f.bridge;
    let first = f.trial("j-1", &[CLAUDE], Budget::UNLIMITED).await;
    let second = f.trial("j-2", &[CLAUDE], Budget::UNLIMITED).await;
    let body = json!({"model": "claude-scripted", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    for trial in [&first, &second] {
        assert!(!bridge.job_budget_exhausted());
        assert_eq!(
            post(trial, "/v1/messages", trial.token(), body.clone())
                .await
                .status(),
            200
        );
    }
    assert!(bridge.job_budget_exhausted());
    let reason = bridge.job_budget_reason().unwrap();
    assert!(
        reason.starts_with("the job dollar budget is spent: $0.0003 of $0.0002"),
        "{reason}"
    );
    let refused = post(&first, "/v1/messages", first.token(), body.clone()).await;
    let refused = json_with_status(refused, 402).await;
    assert_eq!(refused["error"]["type"], "billing_error");
    assert_eq!(refused["error"]["message"], reason.as_str());
    let usage = first.close().await.unwrap();
    assert_eq!(usage.budget_exhausted.as_deref(), Some(reason.as_str()));
    second.close().await.unwrap();
    let job = bridge.job_usage();
    assert_eq!(
        (job.n_trials, job.totals.n_calls, job.totals.n_refused_calls),
        (2, 2, 1)
    );
    assert_eq!(job.budget_exhausted.as_deref(), Some(reason.as_str()));
}

#[tokio::test]
async fn upstream_keys_echoed_by_the_upstream_are_redacted_before_the_agent_sees_them() {
    let f = fixture().await;
    let trial = f.trial("t-echo", &[GPT], Budget::UNLIMITED).await;
    for stream in [false, true] {
        let text = call_text(&trial, CHAT_ROUTE, chat("gpt-scripted", "ECHO_KEY", stream)).await;
        assert!(
            !text.contains(OPENAI_KEY),
            "the upstream key reached the agent: {text}"
        );
        assert!(text.contains("[REDACTED]"), "{text}");
    }
    let dir = f.dir.path().join("t-echo");
    let token = trial.token().to_owned();
    trial.close().await.unwrap();
    assert_no_secrets_under(&dir, &[OPENAI_KEY, ANTHROPIC_KEY, &token]);
}

#[tokio::test]
async fn upstream_failures_are_passed_on_and_recorded() {
    let f = fixture().await;
    let trial = f
        .trial("t-fail", &[GPT, "openai/gpt-unpriced"], Budget::UNLIMITED)
        .await;
    let failed = chat_call(&trial, "gpt-scripted", "FAIL_500", false).await;
    let body = json_with_status(failed, 500).await;
    assert_eq!(body["error"]["message"], "scripted failure");

    let mut broken = chat_call(&trial, "gpt-scripted", "BREAK_STREAM", true).await;
    assert_eq!(broken.status(), 200);
    let mut outcome = Ok(());
    loop {
        match broken.chunk().await {
            Ok(Some(_)) => continue,
            Ok(None) => break,
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    assert!(
        outcome.is_err(),
        "a broken upstream stream looked complete to the agent"
    );

    let unpriced = chat_call(&trial, "gpt-unpriced", "hi", false).await;
    assert_eq!(unpriced.status(), 200);
    unpriced.text().await.unwrap();

    let dir = f.dir.path().join("t-fail");
    let usage = trial.close().await.unwrap();
    let mut records = calls(&dir);
    records.sort_by_key(|r| r["seq"].as_u64());
    assert_eq!(records[0]["outcome"], "upstream_error");
    assert_eq!(records[0]["status"], 500);
    assert_eq!(records[0]["usage"], Value::Null);
    assert_eq!(records[1]["outcome"], "upstream_unreachable");
    assert!(
        records[1]["error"].as_str().unwrap().contains("broke off"),
        "{}",
        records[1]
    );
    assert_eq!(records[2]["outcome"], "ok");
    assert_eq!(records[2]["price_known"], false);
    assert_eq!(records[2]["cost_usd"], Value::Null);
    assert_eq!(
        usage.unpriced_models.iter().collect::<Vec<_>>(),
        ["openai/gpt-unpriced"]
    );
    assert_eq!(usage.n_failed_calls, 2);
    // The stream that broke off never reported its usage: it is charged its request's size
    // as input and the default output cap (it set no max_tokens), and priced.
    let charged = &records[1]["charged"];
    assert_eq!(charged["n_output_tokens"], 32_768, "{}", records[1]);
    assert_eq!(charged["n_input_tokens"], records[1]["request_bytes"]);
    assert_eq!(usage.n_calls_charged_estimate, 1);
    assert!(usage.cost_usd > 0.0);
    assert_eq!(
        usage.n_input_tokens,
        upstream::CHAT_USAGE.input + charged["n_input_tokens"].as_u64().unwrap()
    );
    assert_eq!(usage.n_output_tokens, upstream::CHAT_USAGE.output + 32_768);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_provider_shaped_502() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let f = Fixture::with(|config| {
        config.providers[0].base_url = format!("http://127.0.0.1:{port}/v1");
    })
    .await;
    let trial = f.trial("t-down", &[GPT], Budget::UNLIMITED).await;
    let response = chat_call(&trial, "gpt-scripted", "hi", false).await;
    let body = json_with_status(response, 502).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach provider 'openai'"),
        "{body}"
    );
    trial.close().await.unwrap();
    assert_eq!(
        calls(&f.dir.path().join("t-down"))[0]["outcome"],
        "upstream_unreachable"
    );
}

#[tokio::test]
async fn closing_cuts_off_running_calls_after_the_grace_and_records_them() {
    let f = Fixture::with(|config| config.close_grace = Duration::from_millis(50)).await;
    let trial = f.trial("t-cut", &[GPT], Budget::UNLIMITED).await;
    // Held upstream until released, which this test never does: only the cut can end it.
    let mut response = chat_call(&trial, "gpt-scripted", "HOLD_STREAM", true).await;
    response.chunk().await.unwrap().unwrap();
    let usage = tokio::time::timeout(Duration::from_secs(30), trial.close())
        .await
        .expect("close waited for the held stream to end instead of cutting it off")
        .unwrap();
    let records = calls(&f.dir.path().join("t-cut"));
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["outcome"], "aborted", "{}", records[0]);
    assert_eq!(usage.n_failed_calls, 1);
}

#[tokio::test]
async fn grants_without_models_or_keys_are_refused_by_name() {
    let f = fixture().await;
    assert_eq!(
        f.refused_grant("t-none", &[]).await,
        "trial 't-none': no models are declared; declare the models the agent may call (--model)"
    );
    let no_key = Fixture::with(|config| {
        config.providers[1].key = llm_bridge::KeySource::Env("RUNNER_TEST_SURELY_UNSET_KEY".into());
    })
    .await;
    assert_eq!(
        no_key.refused_grant("t-nokey", &[CLAUDE]).await,
        "trial 't-nokey' declares model 'anthropic/claude-scripted', but the runner has no key for provider 'anthropic' (set environment variable RUNNER_TEST_SURELY_UNSET_KEY)"
    );
    let mut config = support::config_for(&f.upstream, f.dir.path());
    config.providers[0].key = llm_bridge::KeySource::File(f.dir.path().join("missing.key"));
    let error = Bridge::new(config).unwrap_err().to_string();
    assert!(
        error.starts_with("cannot read the key for provider 'openai' from key file"),
        "{error}"
    );
}

#[tokio::test]
async fn calls_beyond_the_per_trial_limit_wait_for_a_slot() {
    let f = Fixture::with(|config| config.max_concurrent_calls_per_trial = 1).await;
    let trial = f.trial("t-slots", &[GPT], Budget::UNLIMITED).await;
    let started = Instant::now();
    let slow = || async {
        call_text(
            &trial,
            CHAT_ROUTE,
            chat("gpt-scripted", "SLOW_STREAM", true),
        )
        .await
    };
    let (a, b) = tokio::join!(slow(), slow());
    assert!(a.contains("[DONE]") && b.contains("[DONE]"));
    // Each call pauses 500 ms upstream; one slot makes them run one after the other.
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(trial.close().await.unwrap().n_calls, 2);
}

#[tokio::test]
async fn tool_call_answers_pass_through_metered_and_recorded_with_keys_redacted() {
    // The upstream echoes its own key inside the tool call's arguments (early in them, so a
    // stream carries it in one delta): the agent and the records get it redacted.
    let arguments = json!({"command": format!("echo {OPENAI_KEY} {}", "x".repeat(200))});
    let usage = upstream::Usage {
        input: 50,
        cached: 10,
        cache_write: 4,
        output: 9,
    };
    let script = upstream::Script::new().when(
        "USE_A_TOOL",
        vec![upstream::Reply::tool_call("Running it.", "bash", arguments).reporting(usage)],
    );
    let f = Fixture::scripted(script, |_| {}).await;
    let trial = f.trial("t-tools", &[GPT, CLAUDE], Budget::UNLIMITED).await;
    let token = trial.token().to_owned();
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]);
    let mut chat_body = chat("gpt-scripted", "USE_A_TOOL", false);
    chat_body["tools"] = tools;
    let whole = call_json(&trial, CHAT_ROUTE, chat_body.clone()).await;
    let choice = &whole["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{whole}");
    let tool_call = &choice["message"]["tool_calls"][0];
    assert_eq!(tool_call["function"]["name"], "bash");
    let args: Value =
        serde_json::from_str(tool_call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(
        args["command"]
            .as_str()
            .unwrap()
            .starts_with("echo [REDACTED] x"),
        "{args}"
    );
    chat_body["stream"] = json!(true);
    let streamed = call_text(&trial, CHAT_ROUTE, chat_body).await;
    assert!(
        streamed.contains("\"tool_calls\"")
            && streamed.contains("\"finish_reason\":\"tool_calls\""),
        "{streamed}"
    );
    let messages = json!({"model": "claude-scripted", "max_tokens": 64,
                          "messages": [{"role": "user", "content": "USE_A_TOOL"}]});
    let whole = call_json(&trial, "/v1/messages", messages.clone()).await;
    assert_eq!(whole["stop_reason"], "tool_use", "{whole}");
    assert_eq!(whole["content"][1]["type"], "tool_use");
    assert_eq!(whole["content"][1]["name"], "bash");
    let mut streaming = messages;
    streaming["stream"] = json!(true);
    let streamed = call_text(&trial, "/v1/messages", streaming).await;
    assert!(
        streamed.contains("input_json_delta") && streamed.contains("\"stop_reason\":\"tool_use\""),
        "{streamed}"
    );
    let responses = json!({"model": "gpt-scripted", "input": "USE_A_TOOL", "stream": true});
    let streamed = call_text(&trial, "/v1/responses", responses).await;
    assert!(
        streamed.contains("response.function_call_arguments.delta"),
        "{streamed}"
    );
    assert!(!streamed.contains(OPENAI_KEY), "the key reached the agent");

    let trial_dir = f.dir.path().join("t-tools");
    let total = trial.close().await.unwrap();
    let records = calls(&trial_dir);
    assert_eq!(records.len(), 5);
    for record in &records {
        assert_eq!(record["outcome"], "ok", "{record}");
        assert_eq!(
            record["usage"],
            json!({"n_input_tokens": 50, "n_cache_tokens": 10,
                   "n_cache_write_tokens": if record["endpoint"] == "messages" { 4 } else { 0 },
                   "n_output_tokens": 9}),
            "{record}"
        );
        let body = std::fs::read_to_string(
            trial_dir
                .join("llm")
                .join(record["response_body"].as_str().unwrap()),
        )
        .unwrap();
        assert!(
            body.contains("bash") && body.contains("[REDACTED]"),
            "the recorded answer lost its tool call: {body}"
        );
    }
    assert_eq!(total.n_calls, 5);
    assert_eq!(total.n_input_tokens, 5 * 50);
    assert_eq!(total.n_output_tokens, 5 * 9);
    assert_no_secrets_under(&trial_dir, &[OPENAI_KEY, ANTHROPIC_KEY, &token]);
}
