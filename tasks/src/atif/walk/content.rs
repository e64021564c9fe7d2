//! The walk over message and observation content: strings, or (from ATIF-v1.6) lists of text
//! and image parts whose image files must exist beside the trajectory.

use serde_json::Value;

use super::super::{Version, schema};
use super::{Walker, get, kind};

impl Walker<'_> {
    pub(super) fn content(&mut self, path: &str, value: &Value, version: Version) {
        match value {
            Value::String(_) => {}
            Value::Array(parts) if version >= Version::V1_6 => {
                for (i, part) in parts.iter().enumerate() {
                    self.content_part(&format!("{path}[{i}]"), part, version);
                }
            }
            Value::Array(_) => self.err(
                path,
                format!("must be a string in {version}; content parts need ATIF-v1.6 or later"),
            ),
            other => self.err(
                path,
                format!(
                    "must be a string or a list of content parts, got {}",
                    kind(other)
                ),
            ),
        }
    }

    pub(super) fn content_part(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::CONTENT_PART, version) else {
            return;
        };
        let kind_ = map
            .get("type")
            .and_then(|t| self.string(&format!("{path}.type"), t));
        match kind_ {
            Some("text") => {
                match get(map, "text") {
                    Some(text) => {
                        self.string(&format!("{path}.text"), text);
                    }
                    None => self.err(&format!("{path}.text"), "a text part needs `text`"),
                }
                if get(map, "source").is_some() {
                    self.err(
                        &format!("{path}.source"),
                        "only image parts have a `source`",
                    );
                }
            }
            Some("image") => {
                match get(map, "source") {
                    Some(source) => self.image_source(&format!("{path}.source"), source, version),
                    None => self.err(&format!("{path}.source"), "an image part needs `source`"),
                }
                if get(map, "text").is_some() {
                    self.err(&format!("{path}.text"), "only text parts have `text`");
                }
            }
            Some(other) => self.err(
                &format!("{path}.type"),
                format!("`{other}` is not one of text, image"),
            ),
            None => {}
        }
    }

    pub(super) fn image_source(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::IMAGE_SOURCE, version) else {
            return;
        };
        if let Some(media) = map
            .get("media_type")
            .and_then(|m| self.string(&format!("{path}.media_type"), m))
            && !schema::IMAGE_MEDIA_TYPES.contains(&media)
        {
            self.err(
                &format!("{path}.media_type"),
                format!(
                    "`{media}` is not one of {}",
                    schema::IMAGE_MEDIA_TYPES.join(", ")
                ),
            );
        }
        let Some(image) = map
            .get("path")
            .and_then(|p| self.string(&format!("{path}.path"), p))
        else {
            return;
        };
        let remote = ["http://", "https://", "data:"]
            .iter()
            .any(|p| image.starts_with(p));
        if let Some(dir) = self.base_dir
            && !remote
            && !dir.join(image).is_file()
        {
            self.err(
                &format!("{path}.path"),
                format!("image file `{image}` does not exist (paths are relative to the trajectory file)"),
            );
        }
    }
}
