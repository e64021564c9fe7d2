//! Nesting depth limits for the YAML and JSON the runner reads from files others wrote (task
//! compose files, `metadata.yaml`, job configs, agent- and task-written records).
//!
//! Building a tree of a deeply nested document, converting it and dropping it all recurse once
//! per level, so a 300,000-deep document would overflow the stack and abort the process instead
//! of failing with a message. serde_json already refuses input nested deeper than 128 levels
//! (its default recursion limit; the workspace never enables `unbounded_depth`, and a test here
//! holds it to that). YAML has no such limit in saphyr, so [`check_yaml`] reads the document's
//! events (saphyr's parser keeps its own state on the heap) and refuses one deeper than
//! [`MAX_DEPTH`] before any tree is built. Aliases count with the depth of what they repeat, as
//! the loader copies the anchored node in their place.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// The deepest nesting of collections accepted, serde_json's own limit: no real compose file,
/// metadata file or job config comes near it.
pub const MAX_DEPTH: usize = 128;

/// A document nested deeper than [`MAX_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {}", self.problem())]
pub struct TooDeep {
    /// The 1-based line where the limit was passed.
    pub line: usize,
}

impl TooDeep {
    /// What is wrong and what to do, without the line.
    pub fn problem(&self) -> String {
        format!(
            "collections nested deeper than {MAX_DEPTH} levels; flatten the document (no real file needs this depth)"
        )
    }
}

/// One open collection: its anchor (0 for none) and the height of its tallest child so far.
struct Open {
    anchor: usize,
    tallest_child: usize,
}

/// Refuses YAML `text` whose collections nest deeper than [`MAX_DEPTH`] (aliases expanded).
/// Syntax errors are not reported here: the loader that reads the text next reports them
/// with its own message.
pub fn check_yaml(text: &str) -> Result<(), TooDeep> {
    let mut open: Vec<Open> = Vec::new();
    // The height of each anchored node (a scalar is 1, a collection 1 + its tallest child).
    let mut heights: HashMap<usize, usize> = HashMap::new();
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return Ok(());
        };
        let line = span.start.line();
        // The height of a node that ends with this event, and its anchor.
        let ended = match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if open.len() >= MAX_DEPTH {
                    return Err(TooDeep { line });
                }
                open.push(Open {
                    anchor,
                    tallest_child: 0,
                });
                None
            }
            Event::SequenceEnd | Event::MappingEnd => {
                open.pop().map(|node| (node.anchor, 1 + node.tallest_child))
            }
            Event::Scalar(_, _, anchor, _) => Some((anchor, 1)),
            Event::Alias(id) => {
                let height = heights.get(&id).copied().unwrap_or(1);
                if open.len() + height > MAX_DEPTH {
                    return Err(TooDeep { line });
                }
                Some((0, height))
            }
            _ => None,
        };
        if let Some((anchor, height)) = ended {
            if anchor != 0 {
                heights.insert(anchor, height);
            }
            if let Some(parent) = open.last_mut() {
                parent.tallest_child = parent.tallest_child.max(height);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_flow(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn ordinary_documents_pass() {
        check_yaml("services:\n  main:\n    image: x\n    environment: [A=1]\n").unwrap();
        check_yaml(&nested_flow(MAX_DEPTH)).unwrap();
        check_yaml("a: [\n").unwrap(); // a syntax error is the loader's to report
    }

    #[test]
    fn three_hundred_thousand_levels_are_refused_without_recursing() {
        // Flow nesting past 255 levels is a syntax error of saphyr's own scanner ("recursion
        // limit exceeded"), which the loader reports; below that it is refused here.
        let err = check_yaml(&nested_flow(200)).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.to_string().contains("deeper than 128"), "{err}");
        // Block nesting, which saphyr does not limit, on one line: `- - - … x`.
        let block = format!("{}x\n", "- ".repeat(300_000));
        assert_eq!(check_yaml(&block), Err(TooDeep { line: 1 }));
        // Block mappings, one level per line.
        let mut lines = String::new();
        for level in 0..MAX_DEPTH + 1 {
            lines.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
        }
        let err = check_yaml(&lines).unwrap_err();
        assert_eq!(err.line, MAX_DEPTH + 1);
    }

    #[test]
    fn aliases_count_with_the_depth_they_repeat() {
        // Each anchor nests the previous one 60 levels deeper: three are 180 deep.
        let mut text = String::new();
        let mut previous: Option<String> = None;
        for i in 0..3 {
            let inner = previous.map_or("1".to_owned(), |p| format!("*{p}"));
            let name = format!("a{i}");
            text.push_str(&format!(
                "{name}: &{name} {}{inner}{}\n",
                "[".repeat(60),
                "]".repeat(60)
            ));
            previous = Some(name);
        }
        assert!(check_yaml(&text).is_err());
        let two: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        check_yaml(&two).unwrap();
    }

    #[test]
    fn serde_json_keeps_its_recursion_limit() {
        let json = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(serde_json::from_str::<serde_json::Value>(&json(100)).is_ok());
        let err = serde_json::from_str::<serde_json::Value>(&json(300_000)).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }
}
