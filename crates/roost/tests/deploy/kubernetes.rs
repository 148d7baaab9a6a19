//! The Kubernetes manifests: the Kubernetes JSON schemas, strictly, then how the StatefulSet,
//! Services, PodDisruptionBudget, ConfigMap, Secrets and the workers' Deployment fit together.

use std::collections::BTreeMap;
use std::process::Command;

use roost_server::ServerConfig;
use roost_worker::WorkerConfig;
use serde_json::Value;

use crate::configs::assert_stop_covers_grace;
use crate::validators::validators;
use crate::{deploy_dir, files_under, host, run, text};

/// The Kubernetes versions the manifests are checked against (kubernetes-validate's schemas).
const KUBERNETES_VERSIONS: &[&str] = &["1.28.0", "1.37.0"];

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn kubernetes_manifests_are_valid_and_fit_together() {
    let v = validators();
    let manifests = files_under(&deploy_dir().join("kubernetes"), ".yaml");
    assert!(!manifests.is_empty());
    for version in KUBERNETES_VERSIONS {
        let out = run(Command::new(&v.kubernetes_validate)
            .args(["--strict", "--quiet", "--kubernetes-version", version])
            .args(&manifests));
        assert!(
            out.status.success(),
            "kubernetes-validate --strict (Kubernetes {version}): {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    let mut by_kind: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for path in &manifests {
        for doc in v.yaml(path) {
            assert!(
                doc["metadata"]["namespace"].is_null(),
                "{}: {} sets a namespace",
                path.display(),
                doc["metadata"]["name"]
            );
            by_kind
                .entry(doc["kind"].as_str().unwrap().to_string())
                .or_default()
                .push(doc);
        }
    }
    let kind = |k: &str| by_kind.get(k).cloned().unwrap_or_default();
    let [sts] = kind("StatefulSet").try_into().expect("one StatefulSet");
    let [worker] = kind("Deployment").try_into().expect("one Deployment");
    let [pdb] = kind("PodDisruptionBudget").try_into().expect("one PDB");
    let [config_map] = kind("ConfigMap").try_into().expect("one ConfigMap");
    let services = kind("Service");
    let secrets = kind("Secret");

    // Stable peer names: a headless Service that publishes pods before they are ready.
    let peers = services
        .iter()
        .find(|s| s["metadata"]["name"] == sts["spec"]["serviceName"])
        .expect("the StatefulSet's serviceName is a Service");
    assert_eq!(peers["spec"]["clusterIP"], "None");
    assert_eq!(peers["spec"]["publishNotReadyAddresses"], true);
    let pod_labels = &sts["spec"]["template"]["metadata"]["labels"];
    for s in &services {
        assert!(
            labels_match(&s["spec"]["selector"], pod_labels),
            "{}",
            s["metadata"]["name"]
        );
    }
    assert!(
        services.iter().any(|s| s["spec"]["clusterIP"].is_null()),
        "a client Service"
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(labels_match(
        &pdb["spec"]["selector"]["matchLabels"],
        pod_labels
    ));

    // Probes: liveness on /healthz, readiness on /readyz.
    let node = &sts["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(node["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(node["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(node[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    for pod in [&sts, &worker] {
        let spec = &pod["spec"]["template"]["spec"];
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        let c = &spec["containers"][0];
        assert!(
            c["resources"]["requests"].is_object(),
            "{}",
            pod["metadata"]["name"]
        );
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    }

    // One config per pod, roost-N.toml for node N+1, reached by its stable name.
    let data = config_map["data"].as_object().unwrap();
    let replicas = sts["spec"]["replicas"].as_u64().unwrap();
    assert_eq!(replicas, 3);
    let peer_service = peers["metadata"]["name"].as_str().unwrap();
    let sts_name = sts["metadata"]["name"].as_str().unwrap();
    // The kubelet kills a pod terminationGracePeriodSeconds after its SIGTERM (30 s unless
    // set): a clean stop within the config's shutdown_grace_secs must fit.
    let termination_grace = |pod: &Value| {
        pod["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: terminationGracePeriodSeconds", pod["metadata"]["name"]))
    };
    for ordinal in 0..replicas {
        let pod = format!("{sts_name}-{ordinal}");
        let text = data
            .get(&format!("{pod}.toml"))
            .unwrap_or_else(|| panic!("no config for pod {pod}"))
            .as_str()
            .unwrap();
        let config: ServerConfig = toml::from_str(text).unwrap();
        assert_eq!(config.node_id, ordinal + 1, "{pod}");
        assert_eq!(
            config.advertise_peer.as_deref().map(host),
            Some(format!("{pod}.{peer_service}").as_str())
        );
        assert_eq!(config.initial_members.len() as u64, replicas);
        assert_stop_covers_grace(
            &format!("statefulset.yaml for {pod} (terminationGracePeriodSeconds)"),
            termination_grace(&sts),
            config.shutdown_grace_secs,
        );
    }
    let worker_config: WorkerConfig = toml::from_str(data["worker.toml"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("configmap.yaml (worker.toml): {e}"));
    assert_stop_covers_grace(
        "worker.yaml (terminationGracePeriodSeconds)",
        termination_grace(&worker),
        worker_config.shutdown_grace_secs,
    );
    assert!(
        node["args"]
            .to_string()
            .contains("/etc/roost/config/${POD_NAME}.toml"),
        "the node picks its config by pod name: {}",
        node["args"]
    );

    // Every file a config names is in the Secret mounted there.
    let mounted = |pod: &Value, config_key: &str| {
        let spec = &pod["spec"]["template"]["spec"];
        let text = data[config_key].as_str().unwrap();
        let config: toml::Value = toml::from_str(text).unwrap();
        for file in ["ca_file", "cert_file", "key_file"] {
            let path = config["tls"][file].as_str().unwrap();
            let (dir, key) = path.rsplit_once('/').unwrap();
            let mount = spec["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == dir)
                .unwrap_or_else(|| panic!("{config_key}: nothing mounted at {dir}"));
            let volume = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|vol| vol["name"] == mount["name"])
                .unwrap();
            let secret_name = &volume["secret"]["secretName"];
            let secret = secrets
                .iter()
                .find(|s| &s["metadata"]["name"] == secret_name)
                .unwrap_or_else(|| panic!("no Secret {secret_name} in secrets.example.yaml"));
            assert!(
                secret["stringData"].get(key).is_some(),
                "{config_key}: Secret {secret_name} has no {key}"
            );
        }
    };
    for ordinal in 0..replicas {
        mounted(&sts, &format!("{sts_name}-{ordinal}.toml"));
    }
    mounted(&worker, "worker.toml");
    let join = worker["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ROOST_JOIN_TOKEN")
        .expect("the worker's join token");
    let join_secret = &join["valueFrom"]["secretKeyRef"]["name"];
    assert!(secrets
        .iter()
        .any(|s| &s["metadata"]["name"] == join_secret));
}
