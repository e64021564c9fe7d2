//! The shell reading of Harbor 0.26's `harbor lint` (`harbor/lint/task.py`): logical lines
//! (continuations joined; comments and heredoc bodies left out), commands split on `;`, `&`
//! and `|`, the Python packages an install command names, whether one is pinned, and whether
//! a command downloads from outside the machine.

use std::sync::LazyLock;

use regex::Regex;

/// The logical lines of a script or Dockerfile with the number of their first physical line:
/// `\`-continued lines are joined, blank and comment lines skipped, heredoc bodies left out
/// (they can hold any language).
pub fn logical_lines(source: &str) -> Vec<(usize, String)> {
    static HEREDOC: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"("(?:\\.|[^"\\])*"|'[^']*')|<<-?\s*(['"]?)(\w+)['"]?"#).expect("compiles")
    });
    let mut out = Vec::new();
    let (mut pending, mut start, mut delimiters) = (String::new(), 1, Vec::<String>::new());
    for (index, raw) in source.lines().enumerate() {
        let number = index + 1;
        if let Some(first) = delimiters.first() {
            if raw.trim() == first {
                delimiters.remove(0);
            }
            continue;
        }
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        if pending.is_empty() {
            start = number;
        }
        let trimmed = raw.trim_end();
        if let Some(body) = trimmed.strip_suffix('\\') {
            pending.push_str(body);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        delimiters = HEREDOC
            .captures_iter(&pending)
            .filter_map(|c| c.get(3).map(|m| m.as_str().to_owned()))
            .collect();
        if delimiters.is_empty() {
            out.push((start, std::mem::take(&mut pending)));
        }
        pending.clear();
    }
    if !pending.is_empty() {
        out.push((start, pending));
    }
    out
}

/// The commands of one logical line with the operator after each (`;`, `&&`, `||`, `&`,
/// `|`, or empty at the end), words unquoted as a POSIX shell would. An unbalanced quote
/// gives no commands (as Harbor's shlex does).
pub fn commands(line: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Vec::new(),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Vec::new(),
                        },
                        Some(c) => word.push(c),
                        None => return Vec::new(),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            ';' | '&' | '|' => {
                end_word(&mut words, &mut word, &mut in_word);
                let mut op = c.to_string();
                if c != ';' && chars.peek() == Some(&c) {
                    op.push(chars.next().unwrap_or(c));
                }
                if !words.is_empty() {
                    out.push((std::mem::take(&mut words), op));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        out.push((words, String::new()));
    }
    for (words, _) in &mut out {
        strip_prefixes(words);
    }
    out
}

/// Drops what stands before a command's name: shell keywords (`if`, `then`, `do`, `!`, ...),
/// `sudo`/`exec`/`time`/`command`, and `NAME=value` assignments (Harbor's reading sees
/// `if pip install x` as a command named `if`; this one sees the `pip install`).
fn strip_prefixes(words: &mut Vec<String>) {
    const PREFIXES: &[&str] = &[
        "if", "then", "else", "elif", "do", "while", "until", "!", "time", "exec", "sudo",
        "command", "{", "(", "nohup",
    ];
    let is_assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let skip = words
        .iter()
        .take_while(|w| PREFIXES.contains(&w.as_str()) || is_assignment(w))
        .count();
    words.drain(..skip);
}

/// Flags of pip/uv that take a value (Harbor's `_VALUE_FLAGS`).
const VALUE_FLAGS: &[&str] = &[
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--cache-dir",
    "--python",
    "-p",
    "--log",
    "--src",
    "--find-links",
    "-f",
    "--platform",
    "--config-settings",
    "-C",
    "--index",
    "--default-index",
    "--from",
];

/// The packages a `pip install`, `python -m pip install`, `uv pip|tool install` or `uvx`
/// command names (empty for any other command).
pub fn packages(command: &[String]) -> Vec<String> {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let args: &[&str] = match words.as_slice() {
        ["pip" | "pip3", "install", rest @ ..] => rest,
        ["python" | "python3", "-m", "pip", "install", rest @ ..] => rest,
        ["uv", "pip" | "tool", "install", rest @ ..] => rest,
        ["uvx", rest @ ..] => rest,
        _ => return Vec::new(),
    };
    let mut found = Vec::new();
    let mut tokens = args.iter();
    while let Some(token) = tokens.next() {
        let (flag, value) = match token.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (*token, None),
        };
        let mut next = || {
            value
                .map(str::to_owned)
                .or_else(|| tokens.next().map(|t| t.to_string()))
        };
        if flag == "--with" || flag == "-w" {
            found.push(next().unwrap_or_default());
        } else if flag == "-e" || flag == "--editable" {
            let package = next().unwrap_or_default();
            if package.contains("://") {
                found.push(package);
            }
        } else if VALUE_FLAGS.contains(&flag) {
            if value.is_none() {
                tokens.next();
            }
        } else if !token.starts_with('-') {
            if words[0] == "uvx" {
                break;
            }
            found.push(token.to_string());
        }
    }
    if found == ["pip"] && args.iter().any(|a| *a == "-U" || *a == "--upgrade") {
        return Vec::new();
    }
    found
}

/// True when `package` is not pinned to one exact version (or a commit / hash for a URL).
/// Local paths, wheels, archives and `$VARIABLES` are left alone.
pub fn unpinned(package: &str) -> bool {
    static URL_PIN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"@[0-9a-fA-F]{40}(?:#|$)|#sha256=[0-9a-fA-F]{64}$").expect("compiles")
    });
    static EXACT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"===?\s*[^*,;\s]+\s*(?:;.*)?$").expect("compiles"));
    if package.is_empty()
        || package.contains('$')
        || package.starts_with(['.', '/'])
        || package.starts_with("file:")
    {
        return false;
    }
    if package.contains("://") {
        return !URL_PIN.is_match(package);
    }
    if [".whl", ".tar.gz", ".zip"]
        .iter()
        .any(|s| package.ends_with(s))
    {
        return false;
    }
    !EXACT.is_match(package)
}

/// True when `command` (followed, after a `|`, by `following`) downloads from a host outside
/// the machine and keeps or runs what it got: `git clone`, `curl … | sh`, `curl -o file`,
/// `wget` (Harbor's `_download`; probes that save nothing are allowed).
pub fn downloads(command: &[String], following: &[String]) -> bool {
    let Some((name, args)) = command.split_first() else {
        return false;
    };
    if !["curl", "wget", "git"].contains(&name.as_str()) {
        return false;
    }
    static GIT_SSH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^git@[^:]+\.[^:]+:").expect("compiles"));
    let external = args.iter().any(|arg| {
        let url = arg.strip_prefix("--url=").unwrap_or(arg);
        let host = url
            .split_once("://")
            .map(|(_, rest)| rest.split(['/', ':', '?', '#']).next().unwrap_or(""))
            .map(|h| h.rsplit('@').next().unwrap_or(h))
            .unwrap_or("");
        (host.contains('.') && !host.starts_with("127.") && !host.ends_with(".localhost"))
            || GIT_SSH.is_match(arg)
    });
    if !external {
        return false;
    }
    if name == "git" {
        return args.first().map(String::as_str) == Some("clone");
    }
    if matches!(following.first().map(String::as_str), Some("sh" | "bash")) {
        return true;
    }
    if args
        .iter()
        .any(|a| ["--spider", "-O-", "-qO-"].contains(&a.as_str()))
    {
        return false;
    }
    for (index, arg) in args.iter().enumerate() {
        let output = if ["-o", "--output", "-O", "--output-document", ">"].contains(&arg.as_str()) {
            if name == "curl" && arg == "-O" {
                return true;
            }
            args.get(index + 1).cloned().unwrap_or_default()
        } else if let Some(value) = arg
            .strip_prefix("--output=")
            .or_else(|| arg.strip_prefix("--output-document="))
        {
            value.to_owned()
        } else if name == "curl" && arg.starts_with("-o") {
            arg[2..].to_owned()
        } else {
            continue;
        };
        return !output.is_empty()
            && output != "-"
            && output != "/dev/null"
            && !output.contains('$');
    }
    name == "wget" || args.iter().any(|a| a.starts_with('>') && a != ">/dev/null")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        commands(line).remove(0).0
    }

    #[test]
    fn lines_join_continuations_and_skip_comments_and_heredocs() {
        let script =
            "# c\npip install \\\n  requests\ncat <<EOF\ncurl https://x.org | sh\nEOF\necho done\n";
        let lines = logical_lines(script);
        assert_eq!(lines[0].0, 2);
        assert!(lines[0].1.contains("requests"), "{lines:?}");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[1].1, "echo done");
    }

    #[test]
    fn commands_split_on_operators_outside_quotes() {
        let found = commands("curl -fsSL 'https://a.org/x|y' | bash && echo \"a;b\"");
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].1, "|");
        assert_eq!(found[0].0[2], "https://a.org/x|y");
        assert_eq!(found[2].0, ["echo", "a;b"]);
        assert!(commands("echo 'open").is_empty());
        assert_eq!(
            words("if PIP_X=1 sudo pip install a==1"),
            ["pip", "install", "a==1"]
        );
    }

    #[test]
    fn packages_and_pins() {
        assert_eq!(
            packages(&words("pip install -r req.txt pytest==8.3.1 requests")),
            ["pytest==8.3.1", "requests"]
        );
        assert_eq!(
            packages(&words(
                "uvx --with pytest-json-ctrf==0.3.5 pytest==8.4.1 -x"
            )),
            ["pytest-json-ctrf==0.3.5"],
            "uvx stops at the tool it runs, as Harbor"
        );
        assert!(packages(&words("pip install -U pip")).is_empty());
        assert!(packages(&words("apt-get install curl")).is_empty());
        assert!(unpinned("requests"));
        assert!(unpinned("requests>=2"));
        assert!(unpinned("numpy==1.*"));
        assert!(!unpinned("requests==2.32.3"));
        assert!(!unpinned("./local"));
        assert!(!unpinned("$PKG"));
        assert!(unpinned("git+https://github.com/a/b"));
        assert!(!unpinned(
            "git+https://github.com/a/b@0123456789012345678901234567890123456789"
        ));
    }

    #[test]
    fn downloads_that_keep_or_run_what_they_fetch() {
        let dl = |line: &str| {
            let found = commands(line);
            let following = found.get(1).map(|c| c.0.clone()).unwrap_or_default();
            downloads(&found[0].0, &following)
        };
        assert!(dl("curl -LsSf https://astral.sh/uv/install.sh | sh"));
        assert!(dl("wget https://example.org/data.csv"));
        assert!(dl("curl -o data.csv https://example.org/data.csv"));
        assert!(dl("git clone https://github.com/a/b"));
        assert!(!dl("curl -s http://localhost:8000/health"));
        assert!(!dl("curl -s http://127.0.0.1/x -o out"));
        assert!(!dl("curl -fsS https://example.org"));
        assert!(!dl("wget --spider https://example.org"));
    }
}
