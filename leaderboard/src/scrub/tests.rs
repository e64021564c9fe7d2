//! End-to-end tests of the library scrub over generated corpora.
