//! Task fixtures: minimal task directories written to disk and loaded with [`Task::load`], as
//! the agent and verifier tests need them.

use std::path::Path;

use tasks::Task;

/// A minimal Harbor task to write: `task.toml`, `instruction.md`, `environment/Dockerfile`
/// (`FROM scratch`) and `tests/test.sh`, plus any extra files.
#[derive(Debug, Clone)]
pub struct TaskFixture {
    name: String,
    instruction: String,
    extra_toml: String,
    test_sh: String,
    files: Vec<(String, String)>,
}

impl TaskFixture {
    /// A task named `name` (`org/name`) whose tests do nothing.
    pub fn new(name: &str) -> Self {
        TaskFixture {
            name: name.to_owned(),
            instruction: "Do nothing.\n".to_owned(),
            extra_toml: String::new(),
            test_sh: String::new(),
            files: Vec::new(),
        }
    }

    /// The instruction text (`instruction.md`).
    pub fn instruction(mut self, text: &str) -> Self {
        self.instruction = text.to_owned();
        self
    }

    /// Lines appended to `task.toml` after `[task] name`, e.g. `"[agent]\ntimeout_sec = 30.0"`.
    pub fn toml(mut self, lines: &str) -> Self {
        self.extra_toml = lines.to_owned();
        self
    }

    /// The body of `tests/test.sh` after its `#!/bin/bash` line.
    pub fn test_sh(mut self, body: &str) -> Self {
        self.test_sh = body.to_owned();
        self
    }

    /// An extra file at `rel` (relative to the task directory), e.g. `tests/helper.txt`.
    pub fn file(mut self, rel: &str, text: &str) -> Self {
        self.files.push((rel.to_owned(), text.to_owned()));
        self
    }

    /// Writes the task into `dir` (created if missing) and loads it.
    pub fn write(&self, dir: &Path) -> Task {
        let write = |rel: &str, text: &str| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().expect("a file has a parent")).unwrap();
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        };
        write(
            "task.toml",
            &format!("[task]\nname = \"{}\"\n{}\n", self.name, self.extra_toml),
        );
        write("instruction.md", &self.instruction);
        write("environment/Dockerfile", "FROM scratch\n");
        write("tests/test.sh", &format!("#!/bin/bash\n{}\n", self.test_sh));
        for (rel, text) in &self.files {
            write(rel, text);
        }
        Task::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    }
}

/// A free TCP port on 127.0.0.1 (loopback only), for servers a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_loadable_task() {
        let dir = tempfile::tempdir().unwrap();
        let task = TaskFixture::new("t/x")
            .instruction("Go.\n")
            .toml("[agent]\ntimeout_sec = 12.0")
            .test_sh("exit 0")
            .file("tests/helper.txt", "h\n")
            .write(dir.path());
        assert_eq!(task.name, "t/x");
        assert_eq!(task.instruction, "Go.\n");
        assert_eq!(task.config.agent.timeout_sec, Some(12.0));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tests/test.sh")).unwrap(),
            "#!/bin/bash\nexit 0\n"
        );
        assert!(dir.path().join("tests/helper.txt").is_file());
        assert_ne!(free_port(), 0);
    }
}
