//! Installed agents: source upload with provenance, in-container server, task API, ATIF traces.
