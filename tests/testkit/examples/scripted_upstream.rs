//! The scripted upstream as a program: an OpenAI/Anthropic-shaped server on 127.0.0.1 whose
//! conversations solve every example of `tasks/examples`, so a user can try `runner run` with
//! a model-calling agent and no provider. Runs until killed.
//!
//! ```sh
//! cargo run -p testkit --example scripted-upstream -- [--port 4190] [--dialect mini-tool-calls] [--key KEY]
//! ```

use std::process::ExitCode;

use testkit::upstream::{CHAT_USAGE, Dialect, ScriptedUpstream, examples_script};

/// The key the upstream accepts unless `--key` says otherwise (deliberately not shaped like a
/// provider key: it is printed and documented).
const DEFAULT_KEY: &str = "scripted-upstream-key";

struct Args {
    port: u16,
    dialect: Dialect,
    key: String,
}

fn usage() -> String {
    let dialects: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
    format!(
        "usage: scripted-upstream [--port N (4190)] [--dialect {} (mini-tool-calls)] [--key KEY ({DEFAULT_KEY})]",
        dialects.join("|")
    )
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args {
        port: 4190,
        dialect: Dialect::MiniToolCalls,
        key: DEFAULT_KEY.to_owned(),
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => {
                let text = value()?;
                parsed.port = text
                    .parse()
                    .map_err(|_| format!("--port {text:?}: give a port number"))?;
            }
            "--dialect" => {
                let text = value()?;
                parsed.dialect = Dialect::ALL
                    .into_iter()
                    .find(|d| d.name() == text)
                    .ok_or(format!("--dialect {text:?}: unknown"))?;
            }
            "--key" => parsed.key = value()?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("scripted-upstream: {message}");
            }
            eprintln!("{}", usage());
            return ExitCode::from(2);
        }
    };
    let script = examples_script(args.dialect, CHAT_USAGE);
    let addr = format!("127.0.0.1:{}", args.port);
    let upstream = match ScriptedUpstream::spawn_at(&addr, &args.key, &args.key, script) {
        Ok(upstream) => upstream,
        Err(e) => {
            eprintln!("scripted-upstream: cannot listen on {addr}: {e}");
            return ExitCode::from(1);
        }
    };
    // What the runner needs, in a form `eval` or a shell can take.
    println!("export OPENAI_BASE_URL={}", upstream.openai_base_url());
    println!("export OPENAI_API_KEY={}", args.key);
    println!(
        "export ANTHROPIC_BASE_URL={}",
        upstream.anthropic_base_url()
    );
    println!("export ANTHROPIC_API_KEY={}", args.key);
    eprintln!(
        "scripted-upstream: serving the examples' conversations ({}) on {}; Ctrl-C stops it",
        args.dialect.name(),
        upstream.addr
    );
    loop {
        std::thread::park();
    }
}
