//! `contain wait`: the jail is started early (while the agent runs) and waits here for the
//! runner's verification order on stdin. Before it reads the order it does two things, and
//! nothing else: asked to (`--make-dir`), it makes the trial's `/logs` directories, before any
//! process of the trial runs, and answers with one byte on stdout (`logdirs.rs`); then, in its
//! own root only, it copies the image's programs the tests will be pinned to
//! (`pins::precopy`). The order is the argument list of `contain verify` plus `--env K=V`
//! pairs, each field ended by a NUL byte and the whole order by an empty field. End of input
//! before that (the runner went away, or decided not to verify in this jail) means: do
//! nothing more.

use super::*;
use std::io::Write;

/// The most bytes an order may hold (arguments and the verifier's environment).
const MAX_ORDER_BYTES: usize = 1 << 20;

/// What the runner ordered: `verify` arguments and the tests' extra environment.
#[derive(Debug, PartialEq)]
pub(crate) struct Order {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Reads one order from `input`; `Ok(None)` when the input ended before one was complete.
pub(crate) fn read_order(mut input: impl Read) -> io::Result<Option<Order>> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find_end(&bytes) {
            break end;
        }
        if bytes.len() > MAX_ORDER_BYTES {
            return Err(io::Error::other("the order is too long"));
        }
        let n = input.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk[..n]);
    };
    let text = std::str::from_utf8(&bytes[..end])
        .map_err(|_| io::Error::other("the order is not UTF-8"))?;
    let mut fields = text.split('\0');
    let mut args = Vec::new();
    let mut env = Vec::new();
    while let Some(field) = fields.next() {
        if field == "--env" {
            let pair = fields.next().unwrap_or_default();
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| io::Error::other(format!("--env {pair:?} is not K=V")))?;
            env.push((key.to_owned(), value.to_owned()));
        } else {
            args.push(field.to_owned());
        }
    }
    Ok(Some(Order { args, env }))
}

/// Where the order's fields end: before the empty field that closes it (`\0\0`, or a leading
/// `\0`), if one has arrived.
fn find_end(bytes: &[u8]) -> Option<usize> {
    if bytes.first() == Some(&0) {
        return Some(0);
    }
    bytes.windows(2).position(|w| w == [0, 0])
}

/// Waits for the order, carries it out as `contain verify` would, and sends the results
/// back over stdout (`stream.rs`), the helper's exit code with them as `out/exit`.
pub(crate) fn wait_and_verify(args: &[String]) -> i32 {
    let dirs = match logdirs::parse(args) {
        Ok(dirs) => dirs,
        Err(message) => {
            eprintln!("contain wait: {message}");
            return 64;
        }
    };
    if !dirs.is_empty() {
        let answer = match logdirs::make_in_trial(&dirs) {
            Ok(()) => logdirs::MADE,
            Err(why) => {
                eprintln!("contain: making the trial's {}: {why}", dirs.join(" "));
                logdirs::NOT_MADE
            }
        };
        let mut stdout = io::stdout().lock();
        if stdout
            .write_all(&[answer])
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return 3;
        }
    }
    // The image's programs copied while the agent runs, from the jail's own root only.
    let search = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
    let ahead = pins::precopy(&toolchain::image_sources(&search));
    let order = match read_order(io::stdin().lock()) {
        Ok(None) => return 0,
        Ok(Some(order)) => order,
        Err(e) => {
            eprintln!("contain: reading the order: {e}");
            return 64;
        }
    };
    // Opened before the namespaces change: afterwards the path is the trial's.
    let out = match open_dir_fd("/.runner/out") {
        Ok(out) => out,
        Err(e) => {
            eprintln!("contain: /.runner/out: {e}");
            return 3;
        }
    };
    for (key, value) in &order.env {
        // SAFETY: the helper is single-threaded here; nothing reads the environment
        // concurrently.
        unsafe { std::env::set_var(key, value) };
    }
    let code = match Options::parse(&order.args) {
        Ok(options) => verify_into(&options, &out, ahead),
        Err(message) => {
            eprintln!("contain: {message}");
            64
        }
    };
    // A failure here leaves the runner a cut stream: it then goes by the exit code alone.
    let sent = fs::write(out.join("exit"), code.to_string()).and_then(|()| {
        stream::write_tree(
            &out.path,
            "out",
            &mut io::BufWriter::with_capacity(1 << 16, io::stdout().lock()),
        )
    });
    if let Err(e) = sent {
        eprintln!("contain: sending the results: {e}");
    }
    code
}
