//! Who the tests run as: Docker user specs resolved against the trial's account files.

use super::*;

pub(crate) fn read_capped(path: &str) -> io::Result<String> {
    let mut text = String::new();
    File::open(path)?
        .take(MAX_ACCOUNT_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Who the tests run as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Identity {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) groups: Vec<u32>,
    pub(crate) home: String,
}

/// Resolves a Docker user spec (`name`, `uid`, `name:group`, `uid:gid`; none means root) against
/// the trial's account files, as `docker exec --user` does.
pub(crate) fn resolve_identity(spec: Option<&str>) -> Result<Identity, String> {
    let passwd = read_capped("/etc/passwd").unwrap_or_default();
    let group = read_capped("/etc/group").unwrap_or_default();
    resolve_user(spec.unwrap_or("0"), &passwd, &group)
}

pub(crate) fn resolve_user(spec: &str, passwd: &str, group: &str) -> Result<Identity, String> {
    let (user_part, group_part) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let entries: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 7)
        .collect();
    let by_name = entries.iter().find(|f| f[0] == user_part);
    let numeric = user_part.parse::<u32>().ok();
    let (uid, mut gid, home, name) = match (by_name, numeric) {
        (Some(f), _) => (
            f[2].parse::<u32>()
                .map_err(|_| format!("bad uid for {user_part} in /etc/passwd"))?,
            f[3].parse::<u32>()
                .map_err(|_| format!("bad gid for {user_part} in /etc/passwd"))?,
            f[5].to_owned(),
            Some(f[0]),
        ),
        (None, Some(uid)) => match entries.iter().find(|f| f[2].parse() == Ok(uid)) {
            Some(f) => (
                uid,
                f[3].parse().unwrap_or(uid),
                f[5].to_owned(),
                Some(f[0]),
            ),
            None => (uid, uid, "/".to_owned(), None),
        },
        (None, None) => return Err(format!("user {user_part:?} is not in /etc/passwd")),
    };
    let groups_file: Vec<Vec<&str>> = group
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 4)
        .collect();
    if let Some(g) = group_part {
        gid = match g.parse::<u32>() {
            Ok(id) => id,
            Err(_) => groups_file
                .iter()
                .find(|f| f[0] == g)
                .and_then(|f| f[2].parse().ok())
                .ok_or_else(|| format!("group {g:?} is not in /etc/group"))?,
        };
    }
    let mut groups = vec![gid];
    if let Some(name) = name {
        for f in &groups_file {
            if f[3].split(',').any(|member| member == name)
                && let Ok(id) = f[2].parse::<u32>()
                && !groups.contains(&id)
            {
                groups.push(id);
            }
        }
    }
    Ok(Identity {
        uid,
        gid,
        groups,
        home,
    })
}

pub(crate) fn user_name(uid: u32, passwd: &str) -> String {
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[2].parse() == Ok(uid))
        .map_or_else(|| uid.to_string(), |f| f[0].to_owned())
}
