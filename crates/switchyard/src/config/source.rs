//! Where a config's text comes from: a file, or a key in etcd (contract
//! §11). What `--config` names, parsed; reading and watching it are the
//! admin API's (`admin::reload`, `admin::watch`, `admin::etcd_source`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// What `--config` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(Arc<Path>),
    Etcd(EtcdKey),
}

/// `etcd://HOST:PORT[,HOST:PORT…]/KEY`: a key of etcd's v3 API, on one or
/// more members of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdKey {
    /// `host:port` of each member, in the order given.
    pub endpoints: Vec<String>,
    /// Everything after the `/` that ends the members: `etcd://h:2379/a/b`
    /// is the key `a/b`, and `etcd://h:2379//a/b` is `/a/b`.
    pub key: String,
}

const ETCD_SCHEME: &str = "etcd://";

impl Source {
    /// `etcd://…` is a key in etcd; anything else is a file's path.
    pub fn parse(arg: &str) -> Result<Source, String> {
        match arg.strip_prefix(ETCD_SCHEME) {
            Some(rest) => EtcdKey::parse(rest).map(Source::Etcd),
            None => Ok(Source::File(Arc::from(Path::new(arg)))),
        }
    }

    /// The file's path, when the config is a file.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::File(p) => Some(p),
            Source::Etcd(_) => None,
        }
    }
}

impl EtcdKey {
    /// What follows `etcd://`.
    fn parse(rest: &str) -> Result<EtcdKey, String> {
        let usage = "write it as etcd://HOST:PORT/KEY";
        let Some((members, key)) = rest.split_once('/') else {
            return Err(format!("etcd://{rest}: no key ({usage})"));
        };
        if key.is_empty() {
            return Err(format!("etcd://{rest}: the key is empty ({usage})"));
        }
        let endpoints: Vec<String> = members.split(',').map(str::to_owned).collect();
        for e in &endpoints {
            let port = e
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
                return Err(format!(
                    "etcd://{rest}: `{e}` is not HOST:PORT ({usage}, e.g. etcd://127.0.0.1:2379/switchyard)"
                ));
            }
        }
        Ok(EtcdKey {
            endpoints,
            key: key.to_owned(),
        })
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Etcd(k) => k.fmt(f),
        }
    }
}

impl fmt::Display for EtcdKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ETCD_SCHEME}{}/{}", self.endpoints.join(","), self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd(arg: &str) -> EtcdKey {
        match Source::parse(arg) {
            Ok(Source::Etcd(k)) => k,
            other => panic!("{arg}: {other:?}"),
        }
    }

    #[test]
    fn an_etcd_url_names_members_and_a_key() {
        let k = etcd("etcd://127.0.0.1:2379/switchyard/config");
        assert_eq!(k.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(k.key, "switchyard/config");
        assert_eq!(k.to_string(), "etcd://127.0.0.1:2379/switchyard/config");
        // A key that starts with `/`, on three members.
        let k = etcd("etcd://a:2379,b:2379,[::1]:2379//switchyard");
        assert_eq!(k.endpoints, ["a:2379", "b:2379", "[::1]:2379"]);
        assert_eq!(k.key, "/switchyard");
    }

    #[test]
    fn anything_else_is_a_file() {
        let s = Source::parse("conf/switchyard.yaml").unwrap();
        assert_eq!(s.path(), Some(Path::new("conf/switchyard.yaml")));
        assert_eq!(s.to_string(), "conf/switchyard.yaml");
    }

    #[test]
    fn a_bad_etcd_url_says_what_is_wrong() {
        for (arg, says) in [
            ("etcd://127.0.0.1:2379", "no key"),
            ("etcd://127.0.0.1:2379/", "the key is empty"),
            ("etcd://127.0.0.1/k", "`127.0.0.1` is not HOST:PORT"),
            ("etcd://:2379/k", "`:2379` is not HOST:PORT"),
            ("etcd://h:99999/k", "is not HOST:PORT"),
            ("etcd://h:1,/k", "`` is not HOST:PORT"),
        ] {
            let e = Source::parse(arg).unwrap_err();
            assert!(e.contains(says), "{arg}: {e}");
        }
    }
}
