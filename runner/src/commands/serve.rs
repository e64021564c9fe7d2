//! `runner serve`: a dataset's tasks as an OpenEnv environment server for trainers (see the
//! `serve` crate), over the Docker backend.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use docker_backend::{DockerBackend, DockerClient, reap_dead_owners};
use engine::LimitSettings;
use serve::{Access, Catalog, ServeConfig, Server};
use tasks::{Dataset, Task};

use crate::exit::{CliError, CommandOutcome};
use crate::note;

/// Arguments of `runner serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A task directory or a dataset directory.
    #[arg(
        short = 'p',
        long,
        required_unless_present = "dataset",
        default_value = "",
        hide_default_value = true,
        value_parser = super::run::any_path
    )]
    pub path: PathBuf,
    /// -d/--dataset NAME[@VERSION] with --registry-url/--registry-path: a dataset by name.
    #[command(flatten)]
    pub source: super::dataset_source::DatasetSourceArgs,
    /// The port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The address to listen on; loopback by default (the server runs commands in containers
    /// for whoever connects). Beyond loopback every request needs the credential
    /// (--token-file, else one generated and printed at start).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// A name the `Host` header may carry besides loopback names and the bound address
    /// (repeatable): the name clients reach this machine by. Others are refused (403), which
    /// stops a web page that points its own name at this machine.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// An `Origin` allowed to send requests (repeatable), as `scheme://host[:port]`. A request
    /// from a web page (one with an `Origin`) is refused (403) unless its origin is listed.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// A file holding the credential every request must carry (HTTP Basic password, as in
    /// http://runner:CREDENTIAL@host:port, or `Authorization: Bearer`). Required on loopback
    /// only when given; beyond loopback one is generated and printed when this is not given.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Sessions (WebSocket connections, one episode each at a time) at once; one more is
    /// answered with a CAPACITY_REACHED error.
    #[arg(long, default_value_t = serve::config::DEFAULT_MAX_SESSIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_sessions: usize,
    /// Where episodes are recorded: `<jobs-dir>/<job-name>/<episode>/`.
    #[arg(long, default_value = "jobs")]
    pub jobs_dir: PathBuf,
    /// The job directory's name (default: `serve-` and the date and time).
    #[arg(long)]
    pub job_name: Option<String>,
    /// Close a session (and remove its container) after this many seconds without a message.
    #[arg(long, default_value_t = serve::config::DEFAULT_IDLE_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Kill a command (`exec`) after this many seconds.
    #[arg(long, default_value_t = serve::config::DEFAULT_EXEC_TIMEOUT.as_secs_f64())]
    pub exec_timeout: f64,
    /// Cut an observation's output after this many bytes, with a marker that says so.
    #[arg(long, default_value_t = serve::config::DEFAULT_MAX_OUTPUT_BYTES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=(64 << 20)))]
    pub max_output_bytes: usize,
    /// Build from environment/Dockerfile even when a task names a prebuilt docker_image.
    #[arg(long)]
    pub force_build: bool,
}

/// Runs `runner serve` until Ctrl-C or SIGTERM; then every episode's container is removed.
pub fn serve(mut args: ServeArgs) -> Result<CommandOutcome, CliError> {
    // A dataset by name becomes its verified local directory before the runtime starts.
    if let Some(resolved) = args.source.resolve()? {
        args.path = resolved.dir;
    }
    if !(args.exec_timeout.is_finite() && args.exec_timeout >= 0.1) {
        return Err(CliError::bad_input(
            "--exec-timeout must be at least 0.1 seconds",
        ));
    }
    super::block_on(serve_async(args))
}

async fn serve_async(args: ServeArgs) -> Result<CommandOutcome, CliError> {
    let servable = servable_tasks(&args.path)?;
    let job_dir = new_job_dir(&args)?;
    let client = connect_engine().await?;
    let (token, generated) = credential(&args)?;
    std::fs::create_dir_all(&job_dir)
        .map_err(|e| CliError::runner_because(format!("{}", job_dir.display()), e))?;
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.host, args.port))
        .await
        .map_err(|e| {
            CliError::bad_input_because(format!("listening on {}:{}", args.host, args.port), e)
        })?;
    let addr = listener.local_addr().map_err(CliError::runner)?;
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(CliError::runner)?;
    let job_id = format!("serve-{}", hex::encode(id));
    let config = serve_config(&args, addr, &job_dir, &job_id, token.clone());
    let count = servable.len();
    // Each session's public container on a network where no other container (another
    // session's, another job's) can reach it.
    let backend = DockerBackend::new(client)
        .isolate_environments(&job_id)
        .await
        .map_err(|e| CliError::runner_because("making the sessions' network", e))?;
    let server = Server::new(backend, Catalog::new(servable), config);
    announce_credential(&args, token.as_deref(), generated, addr.port());
    if let Some(network) = server.backend().public_network() {
        note!(
            "sessions' containers join network {network}, on which no container can reach another"
        );
    }
    note!(
        "serving {count} task(s) on http://{addr} (OpenEnv sessions at ws://{addr}/ws, at most {} at once); episodes -> {}",
        args.max_sessions,
        job_dir.display()
    );
    serve::run(server, listener, shutdown_signal())
        .await
        .map_err(|e| CliError::runner_because("serving", e))?;
    note!("stopped; every episode's container was removed");
    Ok(CommandOutcome::Success)
}

/// The tasks of `path` that runner serve can offer, each other one named in a warning;
/// refused when none is left.
fn servable_tasks(path: &Path) -> Result<Vec<Task>, CliError> {
    let dataset = Dataset::load(path).map_err(CliError::bad_input)?;
    for skipped in &dataset.skipped {
        note!("warning: not served: {skipped}");
    }
    let (servable, refused): (Vec<_>, Vec<_>) = dataset
        .tasks
        .into_iter()
        .partition(|t| serve::catalog::unservable(t).is_none());
    for task in &refused {
        if let Some(reason) = serve::catalog::unservable(task) {
            note!("warning: not served: {reason}");
        }
    }
    if servable.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} has no task runner serve can offer",
            dataset.dir.display()
        )));
    }
    Ok(servable)
}

/// `<jobs-dir>/<job-name>`, refused when it already holds anything; not made yet.
fn new_job_dir(args: &ServeArgs) -> Result<PathBuf, CliError> {
    let job_name = args.job_name.clone().unwrap_or_else(|| {
        chrono::Local::now()
            .format("serve-%Y-%m-%d__%H-%M-%S")
            .to_string()
    });
    let job_dir = args.jobs_dir.join(&job_name);
    if std::fs::read_dir(&job_dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(CliError::bad_input(format!(
            "job directory {} already exists; choose another --job-name",
            job_dir.display()
        )));
    }
    Ok(job_dir)
}

/// The engine of DOCKER_HOST, checked to jail verifiers, with the containers of runner
/// processes that are gone removed.
async fn connect_engine() -> Result<DockerClient, CliError> {
    let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
    docker_backend::check_jail(&client)
        .await
        .map_err(CliError::bad_input)?;
    match reap_dead_owners(&client).await {
        Ok(0) => {}
        Ok(n) => note!("removed {n} container(s) left behind by runner processes that are gone"),
        Err(e) => note!("warning: could not reap leftover containers: {e}"),
    }
    Ok(client)
}

/// The server's settings from the flags.
fn serve_config(
    args: &ServeArgs,
    addr: SocketAddr,
    job_dir: &Path,
    job_id: &str,
    token: Option<String>,
) -> ServeConfig {
    let access = Access::new(args.host, &args.allowed_hosts, &args.allowed_origins, token);
    ServeConfig {
        addr,
        max_sessions: args.max_sessions,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        exec_timeout: Duration::from_secs_f64(args.exec_timeout),
        max_output_bytes: args.max_output_bytes,
        job_dir: std::path::absolute(job_dir).unwrap_or(job_dir.to_path_buf()),
        job_id: job_id.to_owned(),
        limits: LimitSettings::default(),
        force_build: args.force_build,
        access,
    }
}

/// Tells the user how requests carry the credential: a generated one printed whole, one
/// from `--token-file` by its file.
fn announce_credential(args: &ServeArgs, token: Option<&str>, generated: bool, port: u16) {
    match (token, generated) {
        (Some(token), true) => {
            // Printed even under --quiet: without it nobody can use the server. Not through
            // `note!`, which redacts a URL's user-info.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "credential: {token}\n  every request needs it: openenv-core's client takes it in its base URL (http://runner:CREDENTIAL@HOST:{port}), other clients as Authorization: Bearer CREDENTIAL",
            );
        }
        (Some(_), false) => note!(
            "every request needs the credential of {} (in the URL as http://runner:CREDENTIAL@HOST:{port}, or Authorization: Bearer)",
            args.token_file
                .as_deref()
                .unwrap_or(Path::new(""))
                .display(),
        ),
        (None, _) => {}
    }
}

/// The credential requests must carry, and whether it was generated here: read from
/// `--token-file`, else generated when the server listens beyond loopback, else none (a
/// loopback server is reachable from this machine only).
fn credential(args: &ServeArgs) -> Result<(Option<String>, bool), CliError> {
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::bad_input_because(format!("--token-file {}", path.display()), e)
        })?;
        let token = text.trim();
        if token.len() < MIN_TOKEN_LEN
            || token
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == ':' || c == '@')
        {
            return Err(CliError::bad_input(format!(
                "--token-file {}: the credential must be one line of at least {MIN_TOKEN_LEN} characters without spaces, ':' or '@' (it goes into URLs); `openssl rand -hex 32` makes one",
                path.display()
            )));
        }
        return Ok((Some(token.to_owned()), false));
    }
    if args.host.is_loopback() {
        return Ok((None, false));
    }
    let token = serve::access::generate_token().map_err(CliError::runner)?;
    Ok((Some(token), true))
}

/// The shortest credential `--token-file` may hold.
const MIN_TOKEN_LEN: usize = 16;

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
