//! Agents: the built-in oracle and nop, and installed agents driven through their in-container task API.
