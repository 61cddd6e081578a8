//! The deployment files in `deploy/` say what the gateway accepts: the
//! Kubernetes ConfigMap's config passes validation, and the manifests'
//! probes and ports are the admin and client listeners it configures.
//! (`.ci/run` also checks the manifests against Kubernetes' own schemas,
//! offline, with kubernetes-validate.)

use std::collections::BTreeMap;

fn read(rel: &str) -> String {
    let path = format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[derive(serde::Deserialize)]
struct ConfigMap {
    data: BTreeMap<String, String>,
}

#[test]
fn the_kubernetes_config_is_a_valid_gateway_config() {
    let cm: ConfigMap = serde_saphyr::from_str(&read("deploy/kubernetes/configmap.yaml")).unwrap();
    let yaml = &cm.data["switchyard.yaml"];
    // The Secret's variables (secret.example.yaml), with stand-in values.
    let secret = read("deploy/kubernetes/secret.example.yaml");
    let env = |name: &str| {
        secret.contains(&format!("{name}:")).then(|| match name {
            "SWITCHYARD_USAGE_URL" => "postgres://u:p@db/usage".to_owned(),
            "SWITCHYARD_REDIS_URL" => "redis://redis:6379/".to_owned(),
            _ => format!("stand-in-{name}"),
        })
    };
    let cfg = switchyard::config::load_str(yaml, "configmap.yaml", &env).unwrap_or_else(|ds| {
        panic!(
            "{}",
            ds.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    assert_eq!(cfg.server.listen.port(), 8080);
    assert_eq!(cfg.server.admin_listen.port(), 9090);
    assert!(
        cfg.server.admin_key.is_some(),
        "the admin listener is keyed"
    );
    // Three replicas share their state: one gateway, not three.
    assert_eq!(cfg.state.backend, switchyard::config::StateBackend::Redis);
    assert_eq!(cfg.cache.backend, switchyard::config::CacheBackend::Redis);
    // The Deployment's ports and probes are those listeners.
    let dep = read("deploy/kubernetes/deployment.yaml");
    for want in [
        "containerPort: 8080",
        "containerPort: 9090",
        "path: /readyz, port: admin",
        "path: /healthz, port: admin",
        "replicas: 3",
    ] {
        assert!(dep.contains(want), "deployment.yaml: {want}");
    }
}
