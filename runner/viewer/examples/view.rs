//! Writes the HTML report of the job dirs given: `cargo run -p viewer --example view -- OUT JOB_DIR...`.
//! A stand-in for `runner view` until the CLI wires it up.

fn main() {
    let mut args = std::env::args_os().skip(1);
    let out = std::path::PathBuf::from(args.next().expect("usage: view OUT JOB_DIR..."));
    let jobs: Vec<std::path::PathBuf> = args.map(Into::into).collect();
    match viewer::write_report(&jobs, &out) {
        Ok(summary) => println!("{}", summary.index.display()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
