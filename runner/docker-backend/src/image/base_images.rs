//! The base images a Dockerfile names literally in its `FROM` lines. A BuildKit build without
//! a client session cannot log in to a registry, so a build whose base needs credentials fails
//! with "no active sessions"; runner then pulls those bases itself, with the Docker config's
//! credentials, and builds again (BuildKit takes a base the engine already has).

/// The images of `FROM` lines, in order and without repeats: not `scratch`, not an earlier
/// stage's name, not one holding a `$` (a build arg runner cannot resolve).
pub fn base_images(dockerfile: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut images: Vec<String> = Vec::new();
    for line in dockerfile.lines() {
        let mut words = line.split_whitespace();
        if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let mut rest = words.skip_while(|w| w.starts_with("--"));
        let Some(image) = rest.next() else { continue };
        let lowered = image.to_ascii_lowercase();
        if lowered != "scratch"
            && !image.contains('$')
            && !stages.contains(&lowered)
            && !images.iter().any(|i| i == image)
        {
            images.push(image.to_owned());
        }
        if rest.next().is_some_and(|w| w.eq_ignore_ascii_case("AS"))
            && let Some(stage) = rest.next()
        {
            stages.push(stage.to_ascii_lowercase());
        }
    }
    images
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_bases_of_every_stage_without_stage_names_or_args() {
        let dockerfile = "ARG V=1\n\
            FROM --platform=linux/amd64 127.0.0.1:5000/builder:1 AS build\n\
            RUN make\n\
            from build as test\n\
            FROM scratch\n\
            FROM base:${V}\n\
            FROM 127.0.0.1:5000/runtime:2\n\
            COPY --from=build /out /out\n\
            FROM 127.0.0.1:5000/builder:1\n";
        assert_eq!(
            base_images(dockerfile),
            ["127.0.0.1:5000/builder:1", "127.0.0.1:5000/runtime:2"]
        );
    }
}
